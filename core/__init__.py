"""The ground floor: what every Trainyard app uses (stored texts, domain errors, the generic
API helpers). It imports no Trainyard app; see docs/architecture.md, "Ranks"."""
