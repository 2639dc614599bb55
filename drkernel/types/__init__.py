"""The data types that cross layers: a rollout's turns and trajectory, prompt groups, the verifier's verdict,
the task row and the weight manifest.

This package is the lowest floor of drkernel/: it imports no torch and nothing else of drkernel, so every
package, actor and deployment can speak these types without pulling in the code that makes them.
"""
