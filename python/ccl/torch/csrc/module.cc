// SPDX-License-Identifier: BSD-3-Clause
// The extension module: builds a Backend for torch.distributed (ccl/torch/__init__.py
// registers the factory) and exposes what Python needs of it.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <cstring>

#include "backend.h"

namespace {

namespace py = pybind11;
using ccl::torch::Backend;

// `compression` is the bytes of a cclCompression_t as ccl's Python package lays it out
// (ccl.Compression); the library checks its size and magic when the communicator is made.
c10::intrusive_ptr<Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, std::optional<py::bytes> compression,
                                   const std::string& compress, const std::string& name) {
  ccl::torch::Settings settings;
  if (compression) {
    const std::string bytes = *compression;
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    TORCH_CHECK_VALUE(bytes.size() >= sizeof(size_t) && bytes.size() <= sizeof z, "ccl: a compression struct of ",
                      bytes.size(), " bytes (this build's has ", sizeof z, ")");
    std::memcpy(&z, bytes.data(), bytes.size());
    settings.compression = z;
  }
  settings.compress = compress;
  settings.name = name;
  py::gil_scoped_release release;  // the rendezvous waits for the other ranks
  return c10::make_intrusive<Backend>(store, rank, size, timeout, std::move(settings));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ccl's torch.distributed backend for CPU tensors (see ccl.torch)";
  py::module_::import("torch.distributed");  // registers c10d::Backend, the base class below
  py::class_<Backend, c10d::Backend, c10::intrusive_ptr<Backend>>(m, "Backend")
      .def("stats", &Backend::stats, py::call_guard<py::gil_scoped_release>(),
           "Counters of the group's communicator by collective: calls, compressed_calls, raw_bytes, wire_bytes, "
           "codec_seconds, auto_chosen, auto_compressed.");
  m.def("create", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::arg("compression") = py::none(), py::arg("compress") = "", py::arg("name") = "",
        "Makes the backend of one process group (rank 0 publishes ccl's unique id in `store`).");
  m.attr("NAME") = Backend::kName;
  // Workers ask Python's main thread to release what finished calls held (Parked); once the
  // interpreter finalizes they must not (a pending call may then never run, or run on a freed
  // interpreter). atexit hooks run before that, while the interpreter is whole.
  py::module_::import("atexit").attr("register")(py::cpp_function([] { ccl::torch::Parked::pythonExiting(); }));
}
