"""What conducts an evaluation: the grid of cells, the loop over agents, and `gf2 compare`."""
