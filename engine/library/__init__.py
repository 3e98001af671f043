"""The model library: models on disk, their index, the starter model, and imports from other apps."""
