"""The CPU cost model's verifier side: the candidate's forward as a trace, replayed and priced by a trusted child."""
