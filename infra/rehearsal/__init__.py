"""The deploy rehearsal: template.yaml created on moto as `sam deploy` would (see infra/rehearse --help)."""
