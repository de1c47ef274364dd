"""Settings declared once: the task family and depth lists (:mod:`.settings`), each config field's
YAML key and flag (:mod:`.options`), the ``gf2`` flags built from them (:mod:`.flags`), and the one
reader of settings YAML (:mod:`.yaml_files`)."""
