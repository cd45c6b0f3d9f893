"""Small shared utilities: the one error path, atomic files, text input, logging."""
