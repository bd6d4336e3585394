"""nnscope runtime: the NNAPI programming model (Model -> Compilation -> Execution)."""
