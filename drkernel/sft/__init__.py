"""Cold-start supervised fine-tuning: response-only loss, plain torch + transformers, no Ray."""
