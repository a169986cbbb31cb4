"""Tasks: PyTorch reference programs in KernelBench format, loaded and understood.

``loading`` reads task files and trees and applies size constants; ``analysis`` traces one forward
(tensors, operators, FLOPs, minimal bytes); ``categories`` names the paper's six categories;
``python_source`` parses Python source safely from several threads. This package imports only the
shared records and errors.
"""
