// Bindings of the pure, single-threaded pieces: the window policy (driven by a
// virtual clock in tests and the simulator), the pending set, offline packing.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "pack_offline.hpp"
#include "pending_set.hpp"
#include "register.hpp"
#include "window_policy.hpp"

namespace py = pybind11;

namespace ribbon {
namespace {

py::array_t<int64_t> to_numpy(std::vector<int64_t>&& v) {
  py::array_t<int64_t> out(static_cast<py::ssize_t>(v.size()));  // int64 [n]
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

}  // namespace

void register_window(py::module_& m) {
  py::class_<WindowPolicy>(m, "WindowPolicy",
                           "The adaptive accumulation window; every call takes the time.")
      .def(py::init([](int64_t budget, int64_t efficient_tokens, int64_t max_seqs,
                       double max_wait_s, double latency_target_s, double rate_time_constant_s,
                       double service_memory) {
             WindowConfig c;
             c.budget = budget;
             c.efficient_tokens = efficient_tokens;
             c.max_seqs = max_seqs;
             c.max_wait_s = max_wait_s;
             c.latency_target_s = latency_target_s;
             c.rate_time_constant_s = rate_time_constant_s;
             c.service_memory = service_memory;
             return WindowPolicy(c);
           }),
           py::kw_only(), py::arg("budget"), py::arg("efficient_tokens"), py::arg("max_seqs"),
           py::arg("max_wait_s"), py::arg("latency_target_s"),
           py::arg("rate_time_constant_s") = 0.25, py::arg("service_memory") = 0.9)
      .def("on_arrival", &WindowPolicy::on_arrival, py::arg("now_s"), py::arg("weight"))
      .def("on_ready", &WindowPolicy::on_ready, py::arg("now_s"))
      .def("on_release", &WindowPolicy::on_release, py::arg("now_s"), py::arg("weight"))
      .def("set_draining", &WindowPolicy::set_draining, py::arg("draining"))
      .def(
          "decide",
          [](const WindowPolicy& p, double now_s, int64_t weight, int64_t seqs,
             double oldest_arrival_s) {
            const Decision d = p.decide(now_s, PendingView{weight, seqs, oldest_arrival_s});
            return py::make_tuple(release_name(d.action), d.wait_s);
          },
          py::arg("now_s"), py::arg("weight"), py::arg("seqs"), py::arg("oldest_arrival_s"),
          "Returns (action, wait_s); action is 'wait' or the reason to release now.")
      .def("arrival_rate", &WindowPolicy::arrival_rate, py::arg("now_s"))
      .def("service_estimate_s", &WindowPolicy::service_estimate_s)
      .def("wait_limit_s", &WindowPolicy::wait_limit_s)
      .def("has_service_model", &WindowPolicy::has_service_model)
      .def("service_overhead_s", &WindowPolicy::service_overhead_s)
      .def("service_s_per_weight", &WindowPolicy::service_s_per_weight)
      .def("fill_target", &WindowPolicy::fill_target, py::arg("rate"));

  py::class_<PendingSet>(m, "PendingSet", "Pending sequences (lengths only) and bin selection.")
      .def(py::init([](uint32_t budget, uint32_t reserve_per_seq, const std::string& order) {
             return PendingSet(budget, reserve_per_seq, parse_order(order));
           }),
           py::arg("budget"), py::arg("reserve_per_seq"), py::arg("order") = "decreasing")
      .def(
          "add",
          [](PendingSet& s, int64_t seq_id, int64_t key, uint32_t length, double arrival_s) {
            s.add(seq_id, key, length, {}, arrival_s);
          },
          py::arg("seq_id"), py::arg("key"), py::arg("length"), py::arg("arrival_s"))
      .def(
          "select_bin",
          [](PendingSet& s, uint32_t max_seqs) {
            std::vector<PendingItem> items;
            s.select_bin(max_seqs, items);
            std::vector<int64_t> ids;
            ids.reserve(items.size());
            for (const auto& it : items) ids.push_back(it.seq_id);
            return to_numpy(std::move(ids));
          },
          py::arg("max_seqs"), "Removes the next bin; returns its seq_ids in ribbon order.")
      .def("cancel", [](PendingSet& s, int64_t key) { return s.cancel(key); }, py::arg("key"))
      .def("__len__", &PendingSet::size)
      .def_property_readonly("weight", &PendingSet::weight)
      .def_property_readonly("tokens", &PendingSet::tokens)
      .def("oldest_arrival_s", [](PendingSet& s) {
        if (s.size() == 0) throw std::invalid_argument("no pending sequence");
        return s.oldest_arrival_s();
      });

  m.def(
      "pack_offline",
      [](const py::array_t<uint32_t, py::array::c_style | py::array::forcecast>& lengths,
         uint32_t budget, uint32_t reserve_per_seq, uint32_t max_seqs, uint64_t window) {
        if (lengths.ndim() != 1)
          throw std::invalid_argument("lengths must be 1-D, got " +
                                      std::to_string(lengths.ndim()) + "-D");
        std::vector<uint32_t> v(lengths.data(), lengths.data() + lengths.shape(0));
        std::vector<int64_t> bins;
        {
          py::gil_scoped_release nogil;
          bins = pack_offline(v, budget, reserve_per_seq, max_seqs, window);
        }
        return to_numpy(std::move(bins));
      },
      py::arg("lengths"), py::arg("budget"), py::arg("reserve_per_seq"), py::arg("max_seqs"),
      py::arg("window") = 0,
      "Packs lengths with the packer's selection (window 0: all pending at once; else\n"
      "streaming: arrive until the pending weight reaches window, form one bin, repeat);\n"
      "returns each sequence's bin index.");
}

}  // namespace ribbon
