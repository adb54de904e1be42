"""The sender simulator and its samples: signed sample deliveries, the events of ``events/``, the
sender that posts them."""
