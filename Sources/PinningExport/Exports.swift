// `import PinningExport` gives the whole library, as before the split (issue 31): the exporter and the formats live
// in PinningExportCore, which the `pinning` executable links alone; this module adds the importer, whose XML
// reading links FoundationXML (libxml2, and through it ICU and liblzma), and which only `pinning-config-import`
// and library users link.
@_exported public import PinningExportCore
