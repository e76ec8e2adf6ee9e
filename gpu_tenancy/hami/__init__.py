"""HAMi's protocol and what reasons in its terms: the GPU catalogue, allocation, the planner, the mock-GPU agent."""
