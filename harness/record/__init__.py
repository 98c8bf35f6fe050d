"""The acceptance record: a data model filled by tests, rendered once at the end of the session."""
