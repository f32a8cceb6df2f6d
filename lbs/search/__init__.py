"""Play-time search (SPARTA, LBS): hand samplers, leaf values, batched rollouts and the search agent."""
