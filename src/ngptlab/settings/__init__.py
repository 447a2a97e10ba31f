"""The params file's settings as the code reads them, below every stage (nothing here imports the rest of the
package):

  schema.py   the schema (config/schema.yaml) read once: its nodes, defaults and arm names
  typed.py    the typed, frozen settings built from a validated params mapping, defaults filled in
  roles.py    what each key does to the results, as its schema entry classes it (the lineage keys' inputs)
"""

from ngptlab.settings.schema import allowed_arms, default, load_schema, resolved_node
from ngptlab.settings.typed import (
    STAND_IN_RUN,
    AddedSeeds,
    Calibrate,
    Condition,
    Design,
    Evaluate,
    MatchedAngle,
    Params,
    Prepare,
    PrunedSweep,
    Report,
    Resources,
    Shape,
    Source,
    Speedup,
    Train,
    filled,
    of_section,
)

__all__ = ["AddedSeeds", "Calibrate", "Condition", "Design", "Evaluate", "MatchedAngle", "Params", "Prepare",
           "PrunedSweep", "Report", "Resources", "STAND_IN_RUN", "Shape", "Source", "Speedup", "Train",
           "allowed_arms",
           "default", "filled", "load_schema", "of_section", "resolved_node"]
