"""A plan's named mesh (docs/plan-format.md) as the 5D grid's fields, for the scripts in
tools/ and tests/ that compare a plan with a ranking or print its grid.

    import plan_mesh
    g = plan_mesh.grid(json.load(open("plan.json")))  # {"gx": 1, ..., "sequence": 2}
    plan_mesh.size(plan, "z")                           # 1 for an axis the mesh lacks
"""


def size(plan, name):
    """The size of mesh axis `name` (1 if the mesh lacks it)."""
    return next((a["size"] for a in plan["mesh"] if a["name"] == name), 1)


def grid(plan):
    """The grid fields a ranking writes: gx, gy, gz, gdata (sequence members included),
    ginter, and sequence and layout where they differ from 1 and axonn3d."""
    g = {"gx": size(plan, "x"), "gy": size(plan, "y"), "gz": size(plan, "z"),
         "gdata": size(plan, "data") * size(plan, "sequence"), "ginter": size(plan, "pipe")}
    if size(plan, "sequence") != 1:
        g["sequence"] = size(plan, "sequence")
    if plan["tensor_layout"] != "axonn3d":
        g["layout"] = plan["tensor_layout"]
    return g


def order(plan):
    """The mesh's axes innermost first, with the sequence axis folded into data."""
    return [a["name"] for a in plan["mesh"] if a["name"] != "sequence"]
