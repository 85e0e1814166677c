// Runs interop.py in Pyodide (CPython 3.12 in WebAssembly) with WINK 0.27.
// Usage: node interop.mjs PYODIDE_DIR WINK_DIR SPEC_DIR IO_DIR
// WINK_DIR is the unpacked wheel; the specs' modules from SPEC_DIR are
// placed at weakincentives/runtime/{inner_messages,conversation,adapter_state}.py
// of a copy of it. Pyodide has no fcntl (WINK's JSONL slice imports it for
// file locks, which this test never takes): a module with no-op locks
// stands in.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, winkDir, specDir, ioDir] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: pyodideDir + path.sep });
py.FS.mkdirTree("/wink");
py.mountNodeFS("/wink", winkDir);
py.FS.mkdirTree("/spec");
py.mountNodeFS("/spec", specDir);
py.FS.mkdirTree("/io");
py.mountNodeFS("/io", ioDir);
try {
  py.runPython(`
import shutil, sys, types
shutil.copytree("/wink/weakincentives", "/lib/wink/weakincentives")
for name in ("inner_messages", "conversation", "adapter_state"):
    shutil.copy(f"/spec/{name}.py", f"/lib/wink/weakincentives/runtime/{name}.py")
sys.path.insert(0, "/lib/wink")
fcntl = types.ModuleType("fcntl")
fcntl.LOCK_SH, fcntl.LOCK_EX, fcntl.LOCK_NB, fcntl.LOCK_UN = 1, 2, 4, 8
fcntl.flock = lambda *args: None
sys.modules["fcntl"] = fcntl
print(sys.version.split()[0])
exec(open("/spec/interop.py").read(), {"__name__": "__main__"})
`);
} catch (e) {
  console.error(String(e.message));
  process.exit(1);
}
