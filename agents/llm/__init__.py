"""LLM policies: backends (one file each), the agent, its resumable query log, and tool mode."""
