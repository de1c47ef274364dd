"""How a step is put into words: the prompts, the one scorer of answers, and the text environment."""
