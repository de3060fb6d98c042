#include "guest/page_cache.hpp"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace airlock::guest {

void advise_random_own_segments() noexcept {
  ::dl_iterate_phdr(
    [](dl_phdr_info* info, size_t, void*) {
      const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD)
          continue;
        uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
        uintptr_t start = begin & ~(page - 1);
        ::madvise(reinterpret_cast<void*>(start), begin + segment.p_memsz - start, MADV_RANDOM);
      }
      return 1; // the executable itself; a static binary has nothing else
    },
    nullptr);
}

} // namespace airlock::guest
