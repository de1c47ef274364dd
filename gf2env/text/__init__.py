"""How a step is put into words: the prompts and the one scorer of answers."""
