"""What the GPU backends (``triton``, ``cuda``, ``hip``) share: the GPU's hardware description for the
roofline (:mod:`.hardware`: datasheet peaks of known NVIDIA and AMD GPUs, an override file, or
peaks measured on the device) and the clock that times a candidate on the device inside the sandbox
child (:mod:`.clock`: L2 flush, persisting-L2 reset, device-wide synchronization, CUDA events with a
host-time cross-check). Neither module imports torch at import time, so importing this package costs
nothing on a machine without a GPU.
"""
