"""Ray-side pieces that are no Serve app but that the actors, the Serve apps and the pipelines all use: starting
Ray, the run's dashboard series and the policy's weight store. They live here because serve_apps is the lowest
layer allowed to import Ray that every layer above drkernel may import (pyproject's import-linter contracts)."""
