"""The HTTP face of the live control plane (`tidegate serve`)."""
