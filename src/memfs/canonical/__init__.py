"""The truth, written once: the data folder's layout, durable writes, backends."""
