# Install layout and the Debian package.
#
# The executables install themselves (fs/ and tools/) to ${CMAKE_INSTALL_SBINDIR}. This
# file adds what makes walfs a distribution service:
#   share/man/man{7,8}/*.gz         every page under packaging/man/ (gzipped, as Debian does)
#   lib/systemd/system/walfs@.service   one instance per pool (see the unit's header)
#   lib/systemd/system/walfs-metrics@.{service,timer}   Prometheus textfile every 15 s
#   libexec/walfs/walfs-prestart    the unit's pre-start check
#   libexec/walfs/walfs-metrics     writes the textfile (walfsctl status --prometheus)
#   share/walfs/postgresql/         the postgresql@.service drop-in and the pg_wal mover
#   share/doc/walfs/                README.md.gz, copyright (DEP-5), changelog.gz
#   share/doc/walfs/examples/       an instance configuration and an fstab line
# Paths are relative to the prefix; the package's prefix is /usr, which is where the unit
# expects /usr/sbin/walfs and /usr/libexec/walfs/walfs-prestart.
#
# `cpack -G DEB` (or `cpack --config CPackConfig.cmake -B DIR`) from the build directory
# makes walfs_VERSION_ARCH.deb. mount(8) needs no helper of ours: for type fuse.walfs it
# falls back to the fuse3 package's /sbin/mount.fuse, which runs `walfs POOL DIR -o ...`
# through /bin/sh with mount(8)'s PATH-less environment, i.e. the shell's default PATH,
# where /usr/sbin/walfs is found.

set(WALFS_PKG_DIR ${CMAKE_CURRENT_SOURCE_DIR})

find_program(WALFS_GZIP gzip)
# walfs_gzip(SOURCE OUTPUT): OUTPUT is SOURCE compressed at build time (gzip -9n: no name
# or time stamp in the archive, so the package is reproducible).
function(walfs_gzip source out)
  get_filename_component(dir ${out} DIRECTORY)
  get_filename_component(name ${source} NAME)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${WALFS_GZIP} -9n -c ${source} > ${out}
    DEPENDS ${source}
    COMMENT "Compressing ${name}"
    VERBATIM)
endfunction()

# --- man pages: whichever exist, compressed at build time, each into the section its
# suffix names (walfs(8) and the tools; libwalfs-direct(7)).
file(GLOB WALFS_MAN_PAGES CONFIGURE_DEPENDS ${WALFS_PKG_DIR}/man/*.[78])
set(WALFS_MAN_OUTPUTS)
foreach(page ${WALFS_MAN_PAGES})
  get_filename_component(name ${page} NAME)
  string(REGEX REPLACE "^.*\\.([0-9])$" "\\1" section ${name})
  if(WALFS_GZIP)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/man/${name}.gz)
    walfs_gzip(${page} ${out})
  else()
    set(out ${page})
  endif()
  list(APPEND WALFS_MAN_OUTPUTS ${out})
  install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
if(WALFS_MAN_OUTPUTS)
  add_custom_target(walfs_man_pages ALL DEPENDS ${WALFS_MAN_OUTPUTS})
endif()

# --- systemd
install(FILES ${WALFS_PKG_DIR}/systemd/walfs@.service
  ${WALFS_PKG_DIR}/systemd/walfs-metrics@.service ${WALFS_PKG_DIR}/systemd/walfs-metrics@.timer
  DESTINATION lib/systemd/system)
install(PROGRAMS ${WALFS_PKG_DIR}/systemd/walfs-prestart ${WALFS_PKG_DIR}/systemd/walfs-metrics
  DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/walfs)

# --- PostgreSQL integration and examples
install(FILES ${WALFS_PKG_DIR}/postgresql/walfs.conf
  DESTINATION ${CMAKE_INSTALL_DATADIR}/walfs/postgresql)
install(PROGRAMS ${WALFS_PKG_DIR}/postgresql/move-pg_wal-to-walfs.sh
  DESTINATION ${CMAKE_INSTALL_DATADIR}/walfs/postgresql)
install(FILES ${WALFS_PKG_DIR}/systemd/15-main.conf.example ${WALFS_PKG_DIR}/systemd/fstab.example
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# --- documentation, as Debian lays it out: the README and the changelog compressed (the
# changelog's name is that of a native package, whose version has no Debian revision),
# the machine-readable copyright file as it is.
if(WALFS_GZIP)
  set(WALFS_DOC_OUT ${CMAKE_CURRENT_BINARY_DIR}/doc)
  walfs_gzip(${PROJECT_SOURCE_DIR}/README.md ${WALFS_DOC_OUT}/README.md.gz)
  walfs_gzip(${WALFS_PKG_DIR}/debian/changelog ${WALFS_DOC_OUT}/changelog.gz)
  add_custom_target(walfs_docs ALL DEPENDS ${WALFS_DOC_OUT}/README.md.gz ${WALFS_DOC_OUT}/changelog.gz)
  install(FILES ${WALFS_DOC_OUT}/README.md.gz ${WALFS_DOC_OUT}/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DOCDIR})
else()
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
  install(FILES ${WALFS_PKG_DIR}/debian/changelog DESTINATION ${CMAKE_INSTALL_DOCDIR})
endif()
install(FILES ${WALFS_PKG_DIR}/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- Debian package
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME walfs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "walfs developers")
# The Maintainer field; packaging/debian/changelog's entries are signed with it too.
set(WALFS_MAINTAINER "walfs maintainers <walfs@lists.walfs.org>" CACHE STRING
  "Maintainer of the Debian package: NAME <ADDRESS>")
set(CPACK_PACKAGE_CONTACT "${WALFS_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${WALFS_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "FUSE file system for PostgreSQL's pg_wal on persistent memory")
# The control file's first Description line is the summary above; this is the rest.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "walfs presents one directory meant for PostgreSQL's write-ahead log. Its files
live in a pool mapped with PMDK's libpmem: on persistent memory a WAL write is
durable when it returns and fsync costs nothing; on ordinary storage the pool
is an msync-backed file. WAL segments are preallocated in one extent each.
.
This package holds the walfs daemon (mountable with mount -t fuse.walfs and
fstab), mkfs.walfs, fsck.walfs, walfsctl, the walfs@.service systemd unit and
a drop-in that makes a PostgreSQL cluster wait for its WAL mount.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)
# fuse3 brings mount.fuse3 and the setuid fusermount3 the daemon mounts through; the
# shared libraries (libfuse3, libpmem, Abseil, libstdc++) are found by dpkg-shlibdeps
# when it is installed (dpkg-dev), and listed by hand otherwise.
find_program(WALFS_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(WALFS_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "fuse3, libfuse3-3 (>= 3.14), libpmem1, libabsl20220623, libstdc++6 (>= 12), libc6")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql-15 | postgresql")
# prerm stops the walfs@ instances before removal (never one whose mount is in use),
# postrm disables them on purge.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${WALFS_PKG_DIR}/debian/postinst
  ${WALFS_PKG_DIR}/debian/prerm
  ${WALFS_PKG_DIR}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

# The shipped package never carries test facilities or benchmark experiments
# (WALFS_TEST_FACILITIES, WALFS_BENCH_EXPERIMENTS: switches no deployment may have). A
# build tree configured with either is a test build: its cpack packages a tree of its
# own instead, package-tree/ under this one, configured from the same sources with both
# off and without the tests, and built by cpack itself (packaging/package_tree.cmake)
# before it installs from it.
if(WALFS_TEST_FACILITIES OR WALFS_BENCH_EXPERIMENTS)
  set(WALFS_PACKAGE_TREE ${PROJECT_BINARY_DIR}/package-tree)
  set(WALFS_PACKAGE_TREE_ARGS
    -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
    -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DWALFS_TEST_FACILITIES=OFF
    -DWALFS_BENCH_EXPERIMENTS=OFF
    -DWALFS_BUILD_TESTS=OFF
    -DWALFS_HARDENING=${WALFS_HARDENING}
    -DWALFS_WERROR=${WALFS_WERROR}
    "-DWALFS_MAINTAINER=${WALFS_MAINTAINER}")
  configure_file(${WALFS_PKG_DIR}/package_tree.cmake.in
    ${PROJECT_BINARY_DIR}/package_tree.cmake @ONLY)
  set(CPACK_INSTALL_SCRIPTS ${PROJECT_BINARY_DIR}/package_tree.cmake)
  set(CPACK_INSTALL_CMAKE_PROJECTS "${WALFS_PACKAGE_TREE};walfs;ALL;/")
endif()
include(CPack)
