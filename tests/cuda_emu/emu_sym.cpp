/* tests/cuda_emu/emu_sym.cpp — the running program's own symbol table
 * (/proc/self/exe's .symtab; every binary of the emulated build carries
 * it): kernel names for reports (the demangled instantiation, e.g.
 * "k_add<float>"), the static __shared__ arrays of each kernel (they are
 * the kernel's function-local statics, "_ZZ<kernel>E<name>", which gives
 * both their addresses for the race detector and the kernel's static
 * shared-memory size for the 48 KiB rule), and code addresses as
 * "function+offset (file:line)" through addr2line when it is installed. */
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include "emu.h"

namespace emu {

struct Sym {
  uintptr_t addr;
  size_t size;
  std::string name; /* mangled */
};
static std::vector<Sym> funcs, statics; /* sorted by address */
static uintptr_t bias;
static bool loaded;

static int first_object(struct dl_phdr_info *info, size_t, void *out) {
  *(uintptr_t *)out = info->dlpi_addr;
  return 1; /* the main program comes first */
}

void init_symbols() {
  if (loaded) return;
  loaded = true;
  dl_iterate_phdr(first_object, &bias);
  int fd = open("/proc/self/exe", O_RDONLY);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return;
  const char *base = (const char *)m;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64) return;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Sym *sy = (const Elf64_Sym *)(base + sh[i].sh_offset);
    const char *str = base + sh[sh[i].sh_link].sh_offset;
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < n; k++) {
      const int type = ELF64_ST_TYPE(sy[k].st_info);
      if (!sy[k].st_value || sy[k].st_shndx == SHN_UNDEF) continue;
      const char *nm = str + sy[k].st_name;
      if (type == STT_FUNC) funcs.push_back(Sym{bias + sy[k].st_value, sy[k].st_size, nm});
      else if (type == STT_OBJECT && !strncmp(nm, "_ZZ", 3) && sy[k].st_size)
        statics.push_back(Sym{bias + sy[k].st_value, sy[k].st_size, nm});
    }
  }
  auto by = [](const Sym &a, const Sym &b) { return a.addr < b.addr; };
  std::sort(funcs.begin(), funcs.end(), by);
  std::sort(statics.begin(), statics.end(), by);
}

static const Sym *find(const std::vector<Sym> &v, uintptr_t a) {
  auto it = std::upper_bound(v.begin(), v.end(), a,
                             [](uintptr_t x, const Sym &s) { return x < s.addr; });
  if (it == v.begin()) return nullptr;
  --it;
  return a < it->addr + (it->size ? it->size : 1) ? &*it : nullptr;
}

static std::string demangle(const std::string &m) {
  int st = 0;
  char *d = abi::__cxa_demangle(m.c_str(), NULL, NULL, &st);
  std::string r = st == 0 && d ? d : m;
  free(d);
  return r;
}

/* "void k_add<float>(float*, ...)" -> "k_add<float>" (drops the return
 * type, the parameters and an anonymous namespace). */
static std::string short_name(std::string d) {
  const std::string anon = "(anonymous namespace)::";
  for (size_t p; (p = d.find(anon)) != std::string::npos;) d.erase(p, anon.size());
  int depth = 0;
  size_t cut = d.size(), start = 0;
  for (size_t i = 0; i < d.size(); i++) {
    char c = d[i];
    if (c == '<') depth++;
    else if (c == '>') depth--;
    else if (c == '(' && depth == 0) {
      cut = i;
      break;
    } else if (c == ' ' && depth == 0) start = i + 1;
  }
  return d.substr(start, cut - start);
}

std::string kernel_name(const void *fn, const char *text) {
  static std::unordered_map<const void *, std::string> cache;
  auto it = cache.find(fn);
  if (it != cache.end()) return it->second;
  init_symbols();
  const Sym *s = find(funcs, (uintptr_t)fn);
  std::string r = s ? short_name(demangle(s->name)) : std::string(text ? text : "?");
  cache[fn] = r;
  return r;
}

size_t kernel_static_smem(const void *fn) {
  static std::unordered_map<const void *, size_t> cache;
  auto it = cache.find(fn);
  if (it != cache.end()) return it->second;
  init_symbols();
  size_t total = 0;
  const Sym *s = find(funcs, (uintptr_t)fn);
  if (s && s->name.size() > 2 && !s->name.compare(0, 2, "_Z")) {
    const std::string pre = "_ZZ" + s->name.substr(2) + "E";
    for (const Sym &v : statics)
      if (!v.name.compare(0, pre.size(), pre)) total += v.size;
  }
  cache[fn] = total;
  return total;
}

bool static_shared_extent(uintptr_t a, uintptr_t *lo, uintptr_t *hi) {
  init_symbols();
  const Sym *s = statics.empty() ? nullptr : find(statics, a);
  if (!s) return false;
  *lo = s->addr;
  *hi = s->addr + s->size;
  return true;
}

std::string shared_symbol(uintptr_t a, uintptr_t *off) {
  const Sym *s = find(statics, a);
  if (!s) {
    *off = a - g_dyn_lo;
    return "dynamic shared memory";
  }
  *off = a - s->addr;
  std::string d = demangle(s->name); /* "k<float>(args)::name" */
  size_t p = d.rfind("::");
  std::string var = p == std::string::npos ? d : d.substr(p + 2);
  return "__shared__ " + var + " of " + short_name(p == std::string::npos ? d : d.substr(0, p));
}

std::string symbolize(uintptr_t pc) {
  init_symbols();
  char b[512];
  const Sym *s = find(funcs, pc);
  if (!s) {
    Dl_info di;
    if (dladdr((void *)pc, &di) && di.dli_sname) {
      snprintf(b, sizeof b, "%s+0x%lx (%s)", demangle(di.dli_sname).c_str(),
               (unsigned long)(pc - (uintptr_t)di.dli_saddr), di.dli_fname);
      return b;
    }
    snprintf(b, sizeof b, "%p", (void *)pc);
    return b;
  }
  std::string line;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "addr2line -e /proc/%d/exe 0x%lx 2>/dev/null", (int)getpid(),
           (unsigned long)(pc - bias));
  FILE *f = popen(cmd, "r");
  if (f) {
    char l[400];
    if (fgets(l, sizeof l, f) && l[0] != '?') {
      l[strcspn(l, "\n")] = 0;
      line = l;
    }
    pclose(f);
  }
  snprintf(b, sizeof b, "%s+0x%lx%s%s%s", short_name(demangle(s->name)).c_str(),
           (unsigned long)(pc - s->addr), line.empty() ? "" : " (", line.c_str(),
           line.empty() ? "" : ")");
  return b;
}

} /* namespace emu */
