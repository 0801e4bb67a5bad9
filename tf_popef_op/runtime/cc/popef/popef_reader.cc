#include "tf_popef_op/runtime/cc/popef/popef_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

namespace tfpopef {
namespace {

constexpr char kMagic[8] = {'P', 'O', 'P', 'E', 'F', 'B', 'L', 'B'};
constexpr uint16_t kVersionMajor = 1;
constexpr uint64_t kHeaderSize = 64;
constexpr size_t kHeaderCrcBytes = 60;  // header_crc32 covers bytes 0..59, then the name

// Little-endian field reads that do not depend on host alignment.
uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t U32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t U64(const uint8_t* p) { return static_cast<uint64_t>(U32(p)) | (static_cast<uint64_t>(U32(p + 4)) << 32); }

// Python decodes names with errors="replace"; keep the bytes, they only appear in messages.
std::string Quoted(const std::string& name) { return "'" + name + "'"; }

}  // namespace

uint32_t Crc32(uint32_t crc, const void* data, size_t n) {
  // zlib's crc32 takes a uInt length; feed large payloads in chunks.
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(n > (1u << 30) ? (1u << 30) : n);
    crc = static_cast<uint32_t>(crc32(crc, p, chunk));
    p += chunk;
    n -= chunk;
  }
  return crc;
}

const char* BlobTypeLabel(BlobType type) {
  switch (type) {
    case BlobType::kMetadata: return "Metadata";
    case BlobType::kExecutable: return "Executable";
    case BlobType::kTensorData: return "TensorData";
    case BlobType::kOpaque: return "Opaque";
  }
  return "Unknown";
}

std::shared_ptr<const PopefReader> PopefReader::OpenFile(const std::string& path) {
  std::shared_ptr<PopefReader> reader(new PopefReader(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) throw Error(ErrorCode::kNotFound, path + ": PopEF file not found");
    throw Error(ErrorCode::kInvalidArgument, path + ": cannot open PopEF file: " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool is_dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument,
                path + (is_dir ? ": is a directory, not a PopEF file" : ": not a regular file"));
  }
  reader->size_ = static_cast<size_t>(st.st_size);
  if (reader->size_ > 0) {
    void* m = ::mmap(nullptr, reader->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(ErrorCode::kInvalidArgument, path + ": cannot map PopEF file: " + std::strerror(err));
    }
    reader->mapping_ = m;
    reader->data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  reader->Parse();
  return reader;
}

std::shared_ptr<const PopefReader> PopefReader::FromBuffer(const void* data, size_t size, const std::string& source) {
  std::shared_ptr<PopefReader> reader(new PopefReader(source));
  reader->copy_.Resize(size);
  if (size > 0) std::memcpy(reader->copy_.data(), data, size);
  reader->data_ = reader->copy_.data();
  reader->size_ = size;
  reader->Parse();
  return reader;
}

PopefReader::~PopefReader() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

void PopefReader::Fail(ErrorCode code, const std::string& what) const { throw Error(code, source_ + ": " + what); }

void PopefReader::Parse() {
  const uint64_t size = size_;
  if (size == 0) Fail(ErrorCode::kDataLoss, "empty file");
  std::map<std::pair<BlobType, std::string>, size_t> named;  // TensorData/Opaque names are keys
  uint64_t offset = 0;
  for (size_t i = 0; offset < size; ++i) {
    const std::string blob = "blob #" + std::to_string(i);
    if (size - offset < kHeaderSize)
      Fail(ErrorCode::kDataLoss, "truncated: " + blob + " header needs " + std::to_string(kHeaderSize) +
                                     " bytes at offset " + std::to_string(offset) + " but the file has " +
                                     std::to_string(size) + " bytes");
    const uint8_t* h = data_ + offset;
    if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0)
      Fail(ErrorCode::kInvalidArgument, "not a PopEF file (bad magic at offset " + std::to_string(offset) + ")");
    const uint16_t major = U16(h + 8), minor = U16(h + 10), type = U16(h + 12);
    const uint32_t name_size = U32(h + 16), payload_crc = U32(h + 20);
    const uint64_t payload_offset = U64(h + 24), payload_size = U64(h + 32), total_size = U64(h + 40);
    const uint32_t header_crc = U32(h + 60);
    if (major != kVersionMajor)
      Fail(ErrorCode::kInvalidArgument, "unsupported PopEF major version " + std::to_string(major) +
                                            " (this reader supports " + std::to_string(kVersionMajor) + ")");
    if (size - offset - kHeaderSize < name_size)
      Fail(ErrorCode::kDataLoss, "truncated: " + blob + " name needs " + std::to_string(name_size) +
                                     " bytes at offset " + std::to_string(offset + kHeaderSize) +
                                     " but the file has " + std::to_string(size) + " bytes");
    const std::string name(reinterpret_cast<const char*>(h + kHeaderSize), name_size);
    const uint32_t crc = Crc32(Crc32(0, h, kHeaderCrcBytes), h + kHeaderSize, name_size);
    if (crc != header_crc)
      Fail(ErrorCode::kDataLoss, "corrupted: header checksum mismatch in " + blob + " (" + Quoted(name) + ")");
    if (type < 1 || type > 4)
      Fail(ErrorCode::kInvalidArgument, blob + " " + Quoted(name) + " has unknown blob type " + std::to_string(type));
    const BlobType blob_type = static_cast<BlobType>(type);
    // Same condition as the Python reader, written so that no sum can overflow.
    if (payload_offset < kHeaderSize + name_size || payload_size > total_size ||
        payload_offset > total_size - payload_size || total_size == 0)
      Fail(ErrorCode::kDataLoss, "corrupted: inconsistent sizes in " + blob + " (" + BlobTypeLabel(blob_type) + " " +
                                     Quoted(name) + ")");
    if (total_size > size - offset)
      Fail(ErrorCode::kDataLoss, "truncated: " + blob + " " + Quoted(name) + " needs " + std::to_string(total_size) +
                                     " bytes at offset " + std::to_string(offset) + " but the file has " +
                                     std::to_string(size) + " bytes");
    const uint8_t* payload = h + payload_offset;
    if (Crc32(0, payload, payload_size) != payload_crc)
      Fail(ErrorCode::kDataLoss, "corrupted: payload checksum mismatch in " + blob + " (" +
                                     BlobTypeLabel(blob_type) + " " + Quoted(name) + ")");
    if (blob_type == BlobType::kTensorData || blob_type == BlobType::kOpaque) {
      const auto [it, added] = named.emplace(std::make_pair(blob_type, name), i);
      if (!added)
        Fail(ErrorCode::kInvalidArgument, blob + " (" + BlobTypeLabel(blob_type) + " " + Quoted(name) +
                                              ") has the same name as blob #" + std::to_string(it->second));
    }
    blobs_.push_back(PopefBlob{blob_type, name, offset, offset + payload_offset, payload,
                               static_cast<size_t>(payload_size), payload_crc, major, minor});
    offset += total_size;
  }
}

const PopefBlob& PopefReader::Single(BlobType type) const {
  const PopefBlob* found = nullptr;
  size_t count = 0;
  for (const PopefBlob& b : blobs_)
    if (b.type == type) {
      found = &b;
      ++count;
    }
  if (count != 1)
    Fail(ErrorCode::kInvalidArgument,
         std::string("expected exactly one ") + BlobTypeLabel(type) + " blob, found " + std::to_string(count));
  return *found;
}

const PopefBlob* PopefReader::FindTensorData(const std::string& name) const {
  for (const PopefBlob& b : blobs_)
    if (b.type == BlobType::kTensorData && b.name == name) return &b;
  return nullptr;
}

std::vector<const PopefBlob*> PopefReader::OfType(BlobType type) const {
  std::vector<const PopefBlob*> out;
  for (const PopefBlob& b : blobs_)
    if (b.type == type) out.push_back(&b);
  return out;
}

}  // namespace tfpopef
