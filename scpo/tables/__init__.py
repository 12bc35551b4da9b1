"""Tables and figures of the results: means over seeds beside the published figures (`success`, `published`, `paper`)
and training curves (`curves`). Where outputs go and how notebooks build their config: `scpo.pipeline`."""
