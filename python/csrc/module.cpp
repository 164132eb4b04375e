// tessera_torch._C: the backend class as a subclass of torch's c10d Backend, and its makers.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backend.hpp"
#include "cuda.hpp"

namespace py = pybind11;

namespace tessera_torch {
namespace {

// The holder of backend objects in Python: a reference that, when it is the last one, lets go of
// the GIL before the backend goes (its end may wait for the progress thread and for peers). torch
// holds its own Backend classes the same way, so the two holders have one layout.
template <class T>
class NoGilRef {
 public:
  NoGilRef() = default;
  NoGilRef(const NoGilRef&) = default;
  NoGilRef(NoGilRef&&) noexcept = default;
  NoGilRef& operator=(const NoGilRef&) = default;
  NoGilRef& operator=(NoGilRef&&) noexcept = default;
  explicit NoGilRef(T* raw) : ref_(c10::intrusive_ptr<T>::unsafe_reclaim_from_nonowning(raw)) {}
  NoGilRef(c10::intrusive_ptr<T> p) : ref_(std::move(p)) {}  // NOLINT: implicit, as a holder
  ~NoGilRef() {
    if (ref_ && PyGILState_Check()) {
      py::gil_scoped_release release;
      ref_.reset();
    }
  }
  T* get() const { return ref_.get(); }

 private:
  c10::intrusive_ptr<T> ref_;
};

}  // namespace
}  // namespace tessera_torch

PYBIND11_DECLARE_HOLDER_TYPE(T, tessera_torch::NoGilRef<T>, true)

PYBIND11_MODULE(_C, m) {
  using tessera_torch::TesseraBackend;
  m.doc() = "tessera's torch.distributed backend (C++ part)";
  // torch's Backend class must be known to pybind11 before it can be our base.
  py::module_::import("torch.distributed");

  py::class_<TesseraBackend, c10d::Backend, tessera_torch::NoGilRef<TesseraBackend>>(
      m, "TesseraBackend",
      "A torch.distributed backend over tessera (made by init_process_group(\"tessera\"))")
      .def(
          "_split",
          [](TesseraBackend& self, int color, int key, int size, std::chrono::milliseconds timeout,
             const std::string& groupName) {
            return self.splitColor(color, key, size, timeout, groupName);
          },
          py::arg("color"), py::arg("key"), py::arg("size"), py::arg("timeout"),
          py::arg("group_name"), py::call_guard<py::gil_scoped_release>(),
          "Collective over this group: tsrCommSplit with (color, key); None where color is -1")
      .def(
          "perform_nocolor_split",
          [](TesseraBackend& self, py::object /*device*/) {
            self.splitColor(TSR_SPLIT_NOCOLOR, 0, -1, std::chrono::milliseconds(0), "");
          },
          py::arg("device") = py::none(), py::call_guard<py::gil_scoped_release>(),
          "A rank outside a new group takes part in the split that makes it (new_group)")
      .def_property_readonly("tessera_rank", &TesseraBackend::rank)
      .def_property_readonly("tessera_size", &TesseraBackend::nranks);

  m.def(
      "_create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& groupName) {
        return TesseraBackend::create(store, rank, size, timeout, groupName);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("group_name") = "", py::call_guard<py::gil_scoped_release>());

  m.def("version", [] {
    int v = 0;
    tsrGetVersion(&v);
    return v;
  });
  m.def("built_with_cuda", &tessera_torch::DeviceState::built);
}
