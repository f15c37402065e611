"""Ray layer: thin actors around the core classes, and the training driver."""
