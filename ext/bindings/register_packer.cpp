// Bindings of the threaded packer. Arguments are converted with the GIL held;
// every wait and every packing step runs with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "packer.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace ribbon {
namespace {

// Checks a caller-provided slot buffer: exact dtype, 1-D, C-contiguous, writeable.
template <typename T>
T* slot_pointer(const py::array& a, const char* what, std::size_t i, std::size_t* size) {
  if (!py::isinstance<py::array_t<T>>(a) || !a.dtype().is(py::dtype::of<T>()))
    throw std::invalid_argument(std::string(what) + "[" + std::to_string(i) + "] has dtype " +
                                std::string(py::str(a.dtype())) + "; expected " +
                                std::string(py::str(py::dtype::of<T>())));
  if (a.ndim() != 1 || !(a.flags() & py::array::c_style) || !a.writeable())
    throw std::invalid_argument(std::string(what) + "[" + std::to_string(i) +
                                "] must be a writeable 1-D C-contiguous array");
  *size = static_cast<std::size_t>(a.shape(0));
  return static_cast<T*>(const_cast<void*>(a.data()));
}

class PyPacker {
 public:
  PyPacker(const PackerConfig& config, const std::vector<py::array>& tokens,
           const std::vector<py::array>& cu_seqlens, const std::vector<py::array>& seq_ids)
      : keep_(tokens) {
    if (tokens.size() != cu_seqlens.size() || tokens.size() != seq_ids.size())
      throw std::invalid_argument("slot_tokens, slot_cu_seqlens and slot_seq_ids differ in length: " +
                                  std::to_string(tokens.size()) + ", " +
                                  std::to_string(cu_seqlens.size()) + ", " +
                                  std::to_string(seq_ids.size()));
    keep_.insert(keep_.end(), cu_seqlens.begin(), cu_seqlens.end());
    keep_.insert(keep_.end(), seq_ids.begin(), seq_ids.end());
    std::vector<SlotBuffers> slots;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      SlotBuffers s;
      std::size_t cu_size = 0;
      s.tokens = slot_pointer<int32_t>(tokens[i], "slot_tokens", i, &s.token_capacity);
      s.cu_seqlens = slot_pointer<int32_t>(cu_seqlens[i], "slot_cu_seqlens", i, &cu_size);
      s.seq_ids = slot_pointer<int64_t>(seq_ids[i], "slot_seq_ids", i, &s.seq_capacity);
      if (cu_size < s.seq_capacity + 1)
        throw std::invalid_argument("slot_cu_seqlens[" + std::to_string(i) +
                                    "] needs one more entry than slot_seq_ids");
      slots.push_back(s);
    }
    core_ = std::make_unique<Packer>(config, std::move(slots));
  }

  void submit(int64_t seq_id, const py::array_t<int32_t, py::array::c_style>& tokens, int64_t key) {
    if (tokens.ndim() != 1)
      throw std::invalid_argument("tokens of sequence " + std::to_string(seq_id) +
                                  " must be 1-D, got " + std::to_string(tokens.ndim()) + "-D");
    const auto n = static_cast<std::size_t>(tokens.shape(0));
    std::vector<int32_t> owned(n);  // the caller may reuse its array after submit
    if (n > 0) std::memcpy(owned.data(), tokens.data(), n * sizeof(int32_t));
    py::gil_scoped_release nogil;
    core_->submit(seq_id, key, std::move(owned));
  }

  void submit_many(const std::vector<int64_t>& seq_ids,
                   const std::vector<py::array_t<int32_t, py::array::c_style>>& tokens,
                   const std::vector<int64_t>& keys) {
    if (seq_ids.size() != tokens.size() || seq_ids.size() != keys.size())
      throw std::invalid_argument("seq_ids, tokens and keys differ in length: " +
                                  std::to_string(seq_ids.size()) + ", " + std::to_string(tokens.size()) +
                                  ", " + std::to_string(keys.size()));
    std::vector<Packer::Submission> batch(seq_ids.size());
    for (std::size_t i = 0; i < seq_ids.size(); ++i) {
      if (tokens[i].ndim() != 1)
        throw std::invalid_argument("tokens of sequence " + std::to_string(seq_ids[i]) +
                                    " must be 1-D, got " + std::to_string(tokens[i].ndim()) + "-D");
      const auto n = static_cast<std::size_t>(tokens[i].shape(0));
      batch[i].seq_id = seq_ids[i];
      batch[i].key = keys[i];
      batch[i].tokens.resize(n);  // the caller may reuse its arrays after submit_many
      if (n > 0) std::memcpy(batch[i].tokens.data(), tokens[i].data(), n * sizeof(int32_t));
    }
    py::gil_scoped_release nogil;
    core_->submit_many(std::move(batch));
  }

  std::optional<BinInfo> next_bin(double timeout_s) {
    py::gil_scoped_release nogil;
    return core_->next_bin(timeout_s);
  }

  void release(uint32_t slot) {
    py::gil_scoped_release nogil;
    core_->release(slot);
  }

  std::vector<int64_t> cancel(int64_t key) {
    py::gil_scoped_release nogil;
    return core_->cancel(key);
  }

  void drain(bool on) { core_->drain(on); }

  void close() {
    py::gil_scoped_release nogil;
    core_->close();
  }

  bool closed() const { return core_->closed(); }
  int64_t pending_tokens(int64_t key) const { return core_->pending_tokens(key); }

  py::dict stats() const {
    PackerStats s;
    {
      py::gil_scoped_release nogil;
      s = core_->stats();
    }
    const double budget = static_cast<double>(core_->config().budget);
    py::dict d;
    d["pending_seqs"] = s.pending_seqs;
    d["pending_tokens"] = s.pending_tokens;
    d["pending_weight"] = s.pending_weight;
    d["submitted_seqs"] = s.submitted_seqs;
    d["submitted_tokens"] = s.submitted_tokens;
    d["bins_emitted"] = s.bins_emitted;
    d["seqs_emitted"] = s.seqs_emitted;
    d["tokens_emitted"] = s.tokens_emitted;
    d["weight_emitted"] = s.weight_emitted;
    d["cancelled_seqs"] = s.cancelled_seqs;
    d["fill_ratio"] = s.bins_emitted > 0
                          ? static_cast<double>(s.weight_emitted) /
                                (static_cast<double>(s.bins_emitted) * budget)
                          : 0.0;
    d["waits"] = s.waits;
    d["wait_s_total"] = s.wait_s_total;
    d["slot_waits"] = s.slot_waits;
    d["free_slots"] = s.free_slots;
    d["arrival_rate_tokens_per_s"] = s.arrival_rate_tokens_per_s;
    d["service_estimate_s"] = s.service_estimate_s;
    d["released_efficient"] = s.released_efficient;
    d["released_no_gain"] = s.released_no_gain;
    d["released_deadline"] = s.released_deadline;
    d["released_rate_low"] = s.released_rate_low;
    d["released_drain"] = s.released_drain;
    return d;
  }

 private:
  std::vector<py::array> keep_;  // the slot buffers stay alive with the packer
  std::unique_ptr<Packer> core_;
};

}  // namespace

void register_packer(py::module_& m) {
  py::class_<BinInfo>(m, "BinInfo", "Where a bin lies in its slot and what it holds.")
      .def_readonly("slot", &BinInfo::slot)
      .def_readonly("num_seqs", &BinInfo::num_seqs)
      .def_readonly("num_tokens", &BinInfo::num_tokens)
      .def_readonly("padded_tokens", &BinInfo::padded_tokens)
      .def_readonly("max_seqlen", &BinInfo::max_seqlen)
      .def_readonly("weight", &BinInfo::weight)
      .def_readonly("oldest_wait_s", &BinInfo::oldest_wait_s)
      .def_property_readonly("reason", [](const BinInfo& b) { return release_name(b.reason); });

  py::class_<PyPacker>(m, "Packer", "The threaded packer over a ring of caller-provided slots.")
      .def(py::init([](uint32_t budget, uint32_t reserve_per_seq, uint32_t max_seqs,
                       uint32_t alignment, int64_t efficient_tokens, double max_wait_s,
                       double latency_target_s, const std::vector<py::array>& slot_tokens,
                       const std::vector<py::array>& slot_cu_seqlens,
                       const std::vector<py::array>& slot_seq_ids, int32_t pad_token,
                       const std::string& order) {
             PackerConfig c;
             c.order = parse_order(order);
             c.budget = budget;
             c.reserve_per_seq = reserve_per_seq;
             c.max_seqs = max_seqs;
             c.alignment = alignment;
             c.efficient_tokens = efficient_tokens;
             c.max_wait_s = max_wait_s;
             c.latency_target_s = latency_target_s;
             c.pad_token = pad_token;
             return std::make_unique<PyPacker>(c, slot_tokens, slot_cu_seqlens, slot_seq_ids);
           }),
           py::kw_only(), py::arg("budget"), py::arg("reserve_per_seq"), py::arg("max_seqs"),
           py::arg("alignment"), py::arg("efficient_tokens"), py::arg("max_wait_s"),
           py::arg("latency_target_s"), py::arg("slot_tokens"), py::arg("slot_cu_seqlens"),
           py::arg("slot_seq_ids"), py::arg("pad_token") = 0, py::arg("order") = "decreasing")
      .def("submit", &PyPacker::submit, py::arg("seq_id"), py::arg("tokens").noconvert(),
           py::arg("key"), "Queue one sequence (int32 1-D array); copies it, never blocks on the consumer.")
      .def("submit_many", &PyPacker::submit_many, py::arg("seq_ids"), py::arg("tokens").noconvert(),
           py::arg("keys"),
           "Queue several sequences at once (all checked first; nothing queued if one is refused).")
      .def("next_bin", &PyPacker::next_bin, py::arg("timeout_s"),
           "Wait (GIL released) for the next bin; None on timeout or after close.")
      .def("release", &PyPacker::release, py::arg("slot"))
      .def("cancel", &PyPacker::cancel, py::arg("key"))
      .def("drain", &PyPacker::drain, py::arg("on"))
      .def("close", &PyPacker::close)
      .def_property_readonly("closed", &PyPacker::closed)
      .def("pending_tokens", &PyPacker::pending_tokens, py::arg("key"))
      .def("stats", &PyPacker::stats);
}

}  // namespace ribbon
