"""One file per engine; each registers itself with ``@register_engine``."""
