"""An example third-party scheduling policy for flowserve (docs/writing-policies.md)."""
