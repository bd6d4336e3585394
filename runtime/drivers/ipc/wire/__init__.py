"""The wire format both sides of the driver IPC share: imported by the application's process
(``client``) and by the driver's process (``service``), importing neither.

``protocol`` (framing), ``transport`` (one record + fds per message), ``codec``,
``execution_codec`` and ``cache_args`` (explicit binary encodings, no pickle), ``status`` (every
reply's leading status), ``layouts`` (fixed message fields), ``shm`` (memfd pools), ``fmq`` and
``fmq_datum`` (burst rings), ``syncfence`` (fences), ``_trace`` (the IPC spans both sides record).
"""
