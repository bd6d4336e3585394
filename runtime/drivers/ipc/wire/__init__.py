"""The wire format both sides of the driver IPC share: imported by the application's process
(``client``) and by the driver's process (``service``), importing neither.

``protocol`` (framing), ``transport`` (one record + fds per message), ``codec`` and
``execution_codec`` (explicit binary encodings, no pickle), ``shm`` (memfd pools), ``fmq`` and
``fmq_datum`` (burst rings), ``syncfence`` (fences), ``_trace`` (the IPC spans both sides record).
"""
