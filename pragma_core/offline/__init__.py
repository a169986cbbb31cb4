"""The offline agents: a recipe Coder and a rule-based Conductor that answer the loop's requests with
no language model, from the traced reference and the structured context (verdict, profiles,
diagnosis, best attempt)."""
