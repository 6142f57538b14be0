"""The mechanism: decision, runtime, agent, trace."""
