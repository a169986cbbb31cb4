"""The recipe families the offline Coder knows, most specific first."""
