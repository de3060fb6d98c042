# Every dependency comes from a Debian package (scripts/bootstrap installs them).
find_package(Threads REQUIRED)
find_package(CapnProto REQUIRED)
find_package(RocksDB REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(LibArchive REQUIRED)  # worker/rootfs: image archive import
find_package(ZLIB REQUIRED)  # gateway: gzip-encoded uploads of the E2B front
find_package(GTest REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)  # Boost::program_options: bench/

# CAF 0.17 ships no CMake config: locate its headers and libraries by hand.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
# The cluster link's mutual TLS (docs/cluster.md): libcaf-openssl0.17.
find_library(CAF_OPENSSL_LIBRARY caf_openssl REQUIRED)
add_library(caf::core UNKNOWN IMPORTED)
set_target_properties(caf::core PROPERTIES IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(caf::io UNKNOWN IMPORTED)
set_target_properties(caf::io PROPERTIES IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
  INTERFACE_LINK_LIBRARIES caf::core)
add_library(caf::openssl UNKNOWN IMPORTED)
set_target_properties(caf::openssl PROPERTIES IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
  INTERFACE_LINK_LIBRARIES "caf::io;OpenSSL::SSL")

if(TARGET RocksDB::rocksdb)
  set(AIRLOCK_ROCKSDB RocksDB::rocksdb)
else()
  set(AIRLOCK_ROCKSDB RocksDB::rocksdb-shared)
endif()
