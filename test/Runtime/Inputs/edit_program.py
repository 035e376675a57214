"""Copies an artifact and edits the first instruction of one op in its
program.pb (through program_pb2, generated beside the copy's parent), keeping
the file's checksum trailer valid, so that the runtime's own checks are what
refuses the edit."""
import os
import shutil
import struct
import sys
import zlib

src, dst, action, spec = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(dst))
import program_pb2  # noqa: E402

shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
path = os.path.join(dst, "program.pb")
prog = program_pb2.Program()
with open(path, "rb") as f:
    sealed = f.read()
assert sealed[-4:] == b"MPCK", "program.pb lacks its checksum trailer"
prog.ParseFromString(sealed[:-8])
op, _, arg = spec.partition("=")
index = next(k for k, i in enumerate(prog.instructions) if i.op == op)
inst = prog.instructions[index]
if action == "delete_op":
    del prog.instructions[index]
elif action == "swap_next":  # with the next instruction
    following = program_pb2.Instruction()
    following.CopyFrom(prog.instructions[index + 1])
    prog.instructions[index + 1].CopyFrom(inst)
    prog.instructions[index].CopyFrom(following)
elif action == "place_result_at":  # the result at the offset of arg's result
    other = next(i for i in prog.instructions if i.op == arg)
    prog.buffers[inst.results[0]].offset = prog.buffers[other.results[0]].offset
elif action == "overlap_results":  # the second result over the first
    prog.buffers[inst.results[1]].offset = prog.buffers[inst.results[0]].offset
elif action == "place_result_over_operand":  # the first result over operand
    operand, _, shift = arg.partition("+")     # arg ("J" or "J+BYTES")
    prog.buffers[inst.results[0]].offset = (
        prog.buffers[inst.operands[int(operand)]].offset + int(shift or 0))
elif action == "set_float":
    name, value = arg.split("=")
    next(a for a in inst.attributes if a.name == name).f = float(value)
elif action == "rename_op":
    inst.op = arg
elif action == "drop_attr":
    keep = [a for a in inst.attributes if a.name != arg]
    del inst.attributes[:]
    inst.attributes.extend(keep)
elif action == "add_attr":
    inst.attributes.add(name=arg, i=1)
elif action == "float_attr":
    a = next(a for a in inst.attributes if a.name == arg)
    a.f = 1.0
elif action == "set_int":
    name, value = arg.split("=")
    next(a for a in inst.attributes if a.name == name).i = int(value)
elif action == "drop_operand":
    inst.operands[int(arg)] = -1
else:
    sys.exit("unknown action " + action)
data = prog.SerializeToString()
with open(path, "wb") as f:  # sealed again: the runtime checks the crc32
    f.write(data + struct.pack("<I", zlib.crc32(data)) + b"MPCK")
