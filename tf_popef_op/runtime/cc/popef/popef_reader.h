// Reads and validates a PopEF file (docs/popef.md §1) without Python.
//
// Ownership: a PopefReader owns the file bytes: a read-only private mmap of the file, or a
// 64-byte aligned copy of a caller's buffer. Every PopefBlob::payload points into those bytes
// and stays valid as long as the reader lives (hold it by shared_ptr).
// Thread safety: immutable after construction; any number of threads may read it.
//
// Validation mirrors popef/reader.py, with the same messages. Codes: kNotFound for a
// missing file, kDataLoss for corruption/truncation (and an empty file), kInvalidArgument
// otherwise. Every offset is bounds-checked with overflow-safe arithmetic: a fuzzed file
// raises an Error, never reads out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"
#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

enum class BlobType : uint16_t { kMetadata = 1, kExecutable = 2, kTensorData = 3, kOpaque = 4 };

// "Metadata", "Executable", "TensorData", "Opaque" (the labels used in messages).
const char* BlobTypeLabel(BlobType type);

// One blob; `payload` points into the owning PopefReader's bytes.
// zlib's CRC-32 of `n` bytes at `data`, continuing from `crc` (0 to start); any size.
uint32_t Crc32(uint32_t crc, const void* data, size_t n);

struct PopefBlob {
  BlobType type;
  std::string name;
  uint64_t offset;          // file offset of the blob header
  uint64_t payload_offset;  // file offset of the payload
  const uint8_t* payload;
  size_t payload_size;
  uint32_t payload_crc32;
  uint16_t version_major;
  uint16_t version_minor;

  std::string_view view() const { return {reinterpret_cast<const char*>(payload), payload_size}; }
};

class PopefReader {
 public:
  // Maps `path` read-only. Missing file -> kNotFound "<path>: PopEF file not found".
  static std::shared_ptr<const PopefReader> OpenFile(const std::string& path);
  // Copies `size` bytes; `source` names the buffer in messages.
  static std::shared_ptr<const PopefReader> FromBuffer(const void* data, size_t size,
                                                       const std::string& source = "<memory>");

  PopefReader(const PopefReader&) = delete;
  PopefReader& operator=(const PopefReader&) = delete;
  ~PopefReader();

  const std::string& source() const { return source_; }  // path or "<memory>"
  size_t size() const { return size_; }
  const std::vector<PopefBlob>& blobs() const { return blobs_; }

  // The only blob of `type`; otherwise kInvalidArgument
  // "<file>: expected exactly one Metadata blob, found N".
  const PopefBlob& Single(BlobType type) const;
  std::string_view MetadataJson() const { return Single(BlobType::kMetadata).view(); }
  std::string_view ExecutableJson() const { return Single(BlobType::kExecutable).view(); }
  // nullptr when there is no TensorData blob of that name.
  const PopefBlob* FindTensorData(const std::string& name) const;
  std::vector<const PopefBlob*> OfType(BlobType type) const;

 private:
  explicit PopefReader(std::string source) : source_(std::move(source)) {}
  void Parse();
  [[noreturn]] void Fail(ErrorCode code, const std::string& what) const;

  std::string source_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // mmap'ed file, or null when the bytes are in copy_
  AlignedBuffer copy_;
  std::vector<PopefBlob> blobs_;
};

}  // namespace tfpopef
