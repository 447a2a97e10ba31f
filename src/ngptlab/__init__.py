"""ngptlab: does the normalized transformer (nGPT) train faster, and is conditioning why?"""

__version__ = "0.1.0"
