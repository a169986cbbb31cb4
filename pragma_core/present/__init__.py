"""What people see of records and runs: rich tables and the tree of attempts as text and picture."""
