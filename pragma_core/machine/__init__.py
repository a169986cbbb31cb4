"""This machine: what its CPU is, how loaded it is, its peaks, and one timing at a time on it.

``hardware`` describes the CPU (cores, caches, vector features); ``load`` reads the load around a
timing and picks the default thread count; ``physical_peaks`` measures the CPU's FMA and streaming
peaks with small C kernels run as child programs; ``roofline`` caches them (measured again when
stale), measures torch's rates beside them and turns a task's bytes and FLOPs into a floor;
``timing_slot`` is the machine-wide lock that a timing holds alone. It imports only the shared
records, errors and files.
"""
