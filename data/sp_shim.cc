// data/sp_shim.cc — C shim over sentencepiece::SentencePieceProcessor (see
// sp_shim.h). The only C++ file of megatrain; compiled by the Makefile with
// $(CXX) and linked with -lsentencepiece.
#include "data/sp_shim.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct mt_sp {
  sentencepiece::SentencePieceProcessor proc;
};

extern "C" mt_sp *mt_sp_load(const char *path, char *err, size_t errlen) {
  mt_sp *sp = new (std::nothrow) mt_sp;
  if (!sp) {
    snprintf(err, errlen, "%s: out of memory", path);
    return nullptr;
  }
  const auto st = sp->proc.Load(path);
  if (!st.ok()) {
    snprintf(err, errlen, "%s: not a SentencePiece model (%s)", path, st.ToString().c_str());
    delete sp;
    return nullptr;
  }
  return sp;
}

extern "C" void mt_sp_free(mt_sp *sp) { delete sp; }
extern "C" int mt_sp_vocab_size(const mt_sp *sp) { return sp->proc.GetPieceSize(); }
extern "C" int mt_sp_eos(const mt_sp *sp) { return sp->proc.eos_id(); }

extern "C" long mt_sp_encode(const mt_sp *sp, const char *text, size_t len, int32_t **ids,
                             size_t *n, size_t *cap, char *err, size_t errlen) {
  std::vector<int> out;
  const auto st = sp->proc.Encode(absl::string_view(text, len), &out);
  if (!st.ok()) {
    snprintf(err, errlen, "SentencePiece encode failed: %s", st.ToString().c_str());
    return -1;
  }
  if (*n + out.size() > *cap) {
    size_t c = *cap ? *cap : 1024;
    while (c < *n + out.size()) c *= 2;
    int32_t *p = static_cast<int32_t *>(realloc(*ids, c * sizeof(int32_t)));
    if (!p) {
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    *ids = p;
    *cap = c;
  }
  for (size_t i = 0; i < out.size(); i++) (*ids)[*n + i] = out[i];
  *n += out.size();
  return static_cast<long>(out.size());
}

extern "C" char *mt_sp_decode(const mt_sp *sp, const int32_t *ids, size_t n, size_t *len,
                              char *err, size_t errlen) {
  std::vector<int> v(ids, ids + n);
  const int size = sp->proc.GetPieceSize();
  for (size_t i = 0; i < n; i++)
    if (v[i] < 0 || v[i] >= size) {
      snprintf(err, errlen, "token id %d outside the SentencePiece vocabulary [0, %d)", v[i],
               size);
      return nullptr;
    }
  std::string s;
  const auto st = sp->proc.Decode(v, &s);
  if (!st.ok()) {
    snprintf(err, errlen, "SentencePiece decode failed: %s", st.ToString().c_str());
    return nullptr;
  }
  char *out = static_cast<char *>(malloc(s.size() + 1));
  if (!out) {
    snprintf(err, errlen, "out of memory");
    return nullptr;
  }
  memcpy(out, s.data(), s.size());
  out[s.size()] = 0;
  if (len) *len = s.size();
  return out;
}

extern "C" const char *mt_sp_piece(const mt_sp *sp, int id, int *is_byte, unsigned char *byte,
                                   int *is_control) {
  if (id < 0 || id >= sp->proc.GetPieceSize()) return nullptr;
  const std::string &p = sp->proc.IdToPiece(id);
  *is_byte = sp->proc.IsByte(id) ? 1 : 0;
  *is_control = sp->proc.IsControl(id) || sp->proc.IsUnknown(id) ? 1 : 0;
  if (*is_byte) *byte = static_cast<unsigned char>(strtoul(p.c_str() + 3, nullptr, 16));
  return p.c_str();
}
