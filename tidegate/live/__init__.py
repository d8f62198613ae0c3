"""The live control plane: the scheduling core on the wall clock over submitted jobs (`tidegate serve`)."""
