/*
 * error.h: MongoDB error codes and the error object that travels down the stack.
 *
 * Every MongoDB error code mayfly can answer with lives in MF_ERROR_CODES below,
 * once, with its code name; nothing else in the tree writes a numeric code.
 * Functions that can fail return 0 on success or -1 on failure and fill the
 * caller's mf_error_t with a code and a message; only src/cmd/ turns it into
 * the reply shape {ok: 0, errmsg, code, codeName} (SPEC H2).
 */
#ifndef MF_ERROR_H
#define MF_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define MF_WUR __attribute__((warn_unused_result))

/* X(code, name): MongoDB 8.0's codes and code names. */
#define MF_ERROR_CODES(X)                                                      \
    X(1, InternalError)                                                        \
    X(2, BadValue)                                                             \
    X(4, NoSuchKey)                                                            \
    X(5, GraphContainsCycle)                                                   \
    X(6, HostUnreachable)                                                      \
    X(7, HostNotFound)                                                         \
    X(8, UnknownError)                                                         \
    X(9, FailedToParse)                                                        \
    X(10, CannotMutateObject)                                                  \
    X(11, UserNotFound)                                                        \
    X(12, UnsupportedFormat)                                                   \
    X(13, Unauthorized)                                                        \
    X(14, TypeMismatch)                                                        \
    X(15, Overflow)                                                            \
    X(16, InvalidLength)                                                       \
    X(17, ProtocolError)                                                       \
    X(18, AuthenticationFailed)                                                \
    X(20, IllegalOperation)                                                    \
    X(22, InvalidBSON)                                                         \
    X(23, AlreadyInitialized)                                                  \
    X(24, LockTimeout)                                                         \
    X(26, NamespaceNotFound)                                                   \
    X(27, IndexNotFound)                                                       \
    X(28, PathNotViable)                                                       \
    X(29, NonExistentPath)                                                     \
    X(31, RoleNotFound)                                                        \
    X(34, CannotBackfillArray)                                                 \
    X(40, ConflictingUpdateOperators)                                          \
    X(43, CursorNotFound)                                                      \
    X(48, NamespaceExists)                                                     \
    X(49, InvalidRoleModification)                                             \
    X(50, MaxTimeMSExpired)                                                    \
    X(52, DollarPrefixedFieldName)                                             \
    X(53, InvalidIdField)                                                      \
    X(54, NotSingleValueField)                                                 \
    X(55, InvalidDBRef)                                                        \
    X(56, EmptyFieldName)                                                      \
    X(57, DottedFieldName)                                                     \
    X(59, CommandNotFound)                                                     \
    X(61, ShardKeyNotFound)                                                    \
    X(66, ImmutableField)                                                      \
    X(67, CannotCreateIndex)                                                   \
    X(68, IndexAlreadyExists)                                                  \
    X(72, InvalidOptions)                                                      \
    X(76, NoReplicationEnabled)                                                \
    X(73, InvalidNamespace)                                                    \
    X(85, IndexOptionsConflict)                                                \
    X(86, IndexKeySpecsConflict)                                               \
    X(96, OperationFailed)                                                     \
    X(100, UnsatisfiableWriteConcern)                                          \
    X(79, UnknownReplWriteConcern)                                             \
    X(111, NotExactValueField)                                                 \
    X(112, WriteConflict)                                                      \
    X(115, CommandNotSupported)                                                \
    X(117, ConflictingOperationInProgress)                                     \
    X(121, DocumentValidationFailure)                                          \
    X(125, CommandFailed)                                                      \
    X(133, FailedToSatisfyReadPreference)                                      \
    X(136, CappedPositionLost)                                                 \
    X(146, ExceededMemoryLimit)                                                \
    X(140, InvalidSSLConfiguration)                                            \
    X(141, SSLHandshakeFailed)                                                 \
    X(334, MechanismUnavailable)                                               \
    X(352, UnsupportedOpQueryCommand)                                          \
    X(359, CannotConvertIndexToUnique)                                         \
    X(123, NotAReplicaSet)                                                     \
    X(322, APIVersionError)                                                    \
    X(323, APIStrictError)                                                     \
    X(324, APIDeprecationError)                                                \
    X(51002, Location51002)                                                    \
    X(51300, Location51300)                                                    \
    X(51003, Location51003)                                                    \
    X(162, CollectionIsEmpty)                                                  \
    X(165, ViewDepthLimitExceeded)                                             \
    X(166, CommandNotSupportedOnView)                                          \
    X(168, InvalidPipelineOperator)                                            \
    X(167, OptionNotSupportedOnView)                                           \
    X(171, CannotIndexParallelArrays)                                          \
    X(175, QueryPlanKilled)                                                    \
    X(197, InvalidIndexSpecificationOption)                                    \
    X(201, CannotBuildIndexKeys)                                               \
    X(207, InvalidUUID)                                                        \
    X(63, StaleShardVersion)                                                   \
    X(150, StaleEpoch)                                                         \
    X(234, RetryChangeStream)                                                  \
    X(232, MaxSubPipelineDepthExceeded)                                        \
    X(13388, StaleConfig)                                                      \
    X(224, QueryFeatureNotAllowed)                                             \
    X(263, OperationNotSupportedInTransaction)                                 \
    X(251, NoSuchTransaction)                                                  \
    X(239, SnapshotTooOld)                                                     \
    X(256, TransactionCommitted)                                               \
    X(290, TransactionExceededLifetimeLimitSeconds)                            \
    X(143, CursorInUse)                                                        \
    X(276, IndexBuildAborted)                                                  \
    X(260, InvalidResumeToken)                                                 \
    X(47, NoMatchingDocument)                                                  \
    X(50808, Location50808)                                                    \
    X(50768, Location50768)                                                    \
    X(280, ChangeStreamFatalError)                                             \
    X(286, ChangeStreamHistoryLost)                                            \
    X(40674, Location40674)                                                    \
    X(291, NoQueryExecutionPlans)                                              \
    X(292, QueryExceededMemoryLimitNoDiskUseAllowed)                           \
    X(189, PrimarySteppedDown)                                                 \
    X(181, AmbiguousIndexKeyPattern)                                           \
    X(183, ClientMetadataMissingField)                                         \
    X(184, ClientMetadataAppNameTooLarge)                                      \
    X(185, ClientMetadataDocumentTooLarge)                                     \
    X(186, ClientMetadataCannotBeMutated)                                      \
    X(31082, SearchNotEnabled)                                                 \
    X(10334, BSONObjectTooLarge)                                               \
    X(64, WriteConcernFailed)                                                  \
    X(74, NodeNotFound)                                                        \
    X(93, InvalidReplicaSetConfig)                                             \
    X(94, NotYetInitialized)                                                   \
    X(95, NotSecondary)                                                        \
    X(103, NewReplicaSetConfigurationIncompatible)                             \
    X(262, ExceededTimeLimit)                                                  \
    X(261, TooManyLogicalSessions)                                             \
    X(264, TooManyFilesOpen)                                                   \
    X(266, FailPointSetFailed)                                                 \
    X(11602, InterruptedDueToReplStateChange)                                  \
    X(13435, NotPrimaryNoSecondaryOk)                                          \
    X(13436, NotPrimaryOrSecondary)                                            \
    X(91, ShutdownInProgress)                                                  \
    X(89, NetworkTimeout)                                                      \
    X(134, ReadConcernMajorityNotAvailableYet)                                 \
    X(9001, SocketException)                                                   \
    X(225, TransactionTooOld)                                                  \
    X(217, IncompleteTransactionHistory)                                       \
    X(10107, NotWritablePrimary)                                               \
    X(11000, DuplicateKey)                                                     \
    X(11600, InterruptedAtShutdown)                                            \
    X(11601, Interrupted)                                                      \
    X(13297, DatabaseDifferCase)                                               \
    X(12587, BackgroundOperationInProgressForNamespace)                        \
    X(15952, Location15952)                                                    \
    X(15955, Location15955)                                                    \
    X(15998, Location15998)                                                    \
    X(16410, Location16410)                                                    \
    X(16436, Location16436)                                                    \
    X(16493, Location16493)                                                    \
    X(16554, TypeMismatch16554)                                                \
    X(16555, Location16555)                                                    \
    X(16608, Location16608)                                                    \
    X(17261, Location17261)                                                    \
    X(17262, Location17262)                                                    \
    X(17307, Location17307)                                                    \
    X(17308, Location17308)                                                    \
    X(17313, Location17313)                                                    \
    X(40218, Location40218)                                                    \
    X(17217, Location17217)                                                    \
    X(17276, Location17276)                                                    \
    X(51144, Location51144)                                                    \
    X(51198, Location51198)                                                    \
    X(28667, Location28667)                                                    \
    X(28724, Location28724)                                                    \
    X(28745, Location28745)                                                    \
    X(31111, Location31111)                                                    \
    X(31170, Location31170)                                                    \
    X(5447000, Location5447000)                                                \
    X(31253, Location31253)                                                    \
    X(31254, Location31254)                                                    \
    X(31249, Location31249)                                                    \
    X(31250, Location31250)                                                    \
    X(31252, Location31252)                                                    \
    X(31259, Location31259)                                                    \
    X(31273, Location31273)                                                    \
    X(31274, Location31274)                                                    \
    X(31275, Location31275)                                                    \
    X(31276, Location31276)                                                    \
    X(31310, Location31310)                                                    \
    X(31324, Location31324)                                                    \
    X(51246, Location51246)                                                    \
    X(51270, Location51270)                                                    \
    X(40090, Location40090)                                                    \
    X(40156, Location40156)                                                    \
    X(40157, Location40157)                                                    \
    X(40160, Location40160)                                                    \
    X(40323, Location40323)                                                    \
    X(40324, Location40324)                                                    \
    X(40352, Location40352)                                                    \
    X(40353, Location40353)                                                    \
    X(4660800, Location4660800)                                                \
    X(4660801, Location4660801)                                                \
    X(4738901, Location4738901)                                                \
    X(4886600, Location4886600)                                                \
    X(4890500, Location4890500)                                                \
    X(4910201, Location4910201)                                                \
    X(26823, Location26823)                                                    \
    X(40414, Location40414)                                                    \
    X(40415, Location40415)                                                    \
    X(50985, Location50985)                                                    \
    X(6026500, Location6026500)                                                \
    X(5979704, Location5979704)                                                \
    X(5979703, Location5979703)                                                \
    X(5979700, Location5979700)                                                \
    X(40430, Location40430)                                                    \
    X(40431, Location40431)                                                    \
    X(40432, Location40432)                                                    \
    X(40433, Location40433)                                                    \
    X(40571, Location40571)                                                    \
    X(40587, Location40587)                                                    \
    X(51024, Location51024)                                                    \
    X(51173, Location51173)                                                    \
    X(51174, Location51174)                                                    \
    X(51175, Location51175)                                                    \
    X(51176, Location51176)                                                    \
    X(6137400, Location6137400)                                                \
    X(6137401, Location6137401)                                                \
    X(10040, Location10040)                                                    \
    X(50848, Location50848)                                                    \
    X(50849, Location50849)                                                    \
    X(51074, Location51074)                                                    \
    X(51075, Location51075)                                                    \
    X(51084, Location51084)                                                    \
    X(51085, Location51085)                                                    \
    X(51091, Location51091)                                                    \
    X(51156, Location51156)                                                    \
    X(7749501, Location7749501)                                                \
    X(5739101, Location5739101)                                                \
    X(5745700, Location5745700)                                                \
    X(5745701, Location5745701)                                                \
    X(5745702, Location5745702)                                                \
    X(5745703, Location5745703)                                                \
    X(5346500, Location5346500)                                                \
    X(51108, Location51108)                                                    \
    X(241, ConversionFailure)                                                  \
    X(15947, Location15947)                                                    \
    X(15956, Location15956)                                                    \
    X(15957, Location15957)                                                    \
    X(15958, Location15958)                                                    \
    X(5107200, Location5107200)                                                \
    X(5107201, Location5107201)                                                \
    X(15972, Location15972)                                                    \
    X(15981, Location15981)                                                    \
    X(15983, Location15983)                                                    \
    X(16006, Location16006)                                                    \
    X(16007, Location16007)                                                    \
    X(16020, Location16020)                                                    \
    X(16021, Location16021)                                                    \
    X(16610, Location16610)                                                    \
    X(16612, Location16612)                                                    \
    X(16702, Location16702)                                                    \
    X(16872, Location16872)                                                    \
    X(16883, Location16883)                                                    \
    X(17124, Location17124)                                                    \
    X(28651, Location28651)                                                    \
    X(28664, Location28664)                                                    \
    X(28689, Location28689)                                                    \
    X(28690, Location28690)                                                    \
    X(28691, Location28691)                                                    \
    X(28714, Location28714)                                                    \
    X(28761, Location28761)                                                    \
    X(28764, Location28764)                                                    \
    X(28765, Location28765)                                                    \
    X(16406, Location16406)                                                    \
    X(5788200, Location5788200)                                                \
    X(40069, Location40069)                                                    \
    X(16004, Location16004)                                                    \
    X(2942507, Location2942507)                                                \
    X(31393, Location31393)                                                    \
    X(51276, Location51276)                                                    \
    X(50989, Location50989)                                                    \
    X(51044, Location51044)                                                    \
    X(51045, Location51045)                                                    \
    X(5439012, Location5439012)                                                \
    X(50723, Location50723)                                                    \
    X(1257300, Location1257300)                                                \
    X(17045, Location17045)                                                    \
    X(17083, Location17083)                                                    \
    X(17080, Location17080)                                                    \
    X(17081, Location17081)                                                    \
    X(17082, Location17082)                                                    \
    X(40060, Location40060)                                                    \
    X(40061, Location40061)                                                    \
    X(40062, Location40062)                                                    \
    X(40063, Location40063)                                                    \
    X(40064, Location40064)                                                    \
    X(40065, Location40065)                                                    \
    X(40067, Location40067)                                                    \
    X(40068, Location40068)                                                    \
    X(16878, Location16878)                                                    \
    X(28646, Location28646)                                                    \
    X(16879, Location16879)                                                    \
    X(28647, Location28647)                                                    \
    X(16880, Location16880)                                                    \
    X(28648, Location28648)                                                    \
    X(16882, Location16882)                                                    \
    X(28650, Location28650)                                                    \
    X(40075, Location40075)                                                    \
    X(40076, Location40076)                                                    \
    X(40077, Location40077)                                                    \
    X(40078, Location40078)                                                    \
    X(40079, Location40079)                                                    \
    X(16874, Location16874)                                                    \
    X(16875, Location16875)                                                    \
    X(16876, Location16876)                                                    \
    X(16877, Location16877)                                                    \
    X(50696, Location50696)                                                    \
    X(50694, Location50694)                                                    \
    X(50695, Location50695)                                                    \
    X(50692, Location50692)                                                    \
    X(40087, Location40087)                                                    \
    X(327391, Location327391)                                                  \
    X(327392, Location327392)                                                  \
    X(40080, Location40080)                                                    \
    X(50700, Location50700)                                                    \
    X(34450, Location34450)                                                    \
    X(34451, Location34451)                                                    \
    X(34452, Location34452)                                                    \
    X(34453, Location34453)                                                    \
    X(34454, Location34454)                                                    \
    X(34455, Location34455)                                                    \
    X(16034, Location16034)                                                    \
    X(16035, Location16035)                                                    \
    X(50752, Location50752)                                                    \
    X(28656, Location28656)                                                    \
    X(28657, Location28657)                                                    \
    X(40096, Location40096)                                                    \
    X(40097, Location40097)                                                    \
    X(50809, Location50809)                                                    \
    X(40093, Location40093)                                                    \
    X(40091, Location40091)                                                    \
    X(40094, Location40094)                                                    \
    X(40092, Location40092)                                                    \
    X(17040, Location17040)                                                    \
    X(17041, Location17041)                                                    \
    X(40386, Location40386)                                                    \
    X(40398, Location40398)                                                    \
    X(40396, Location40396)                                                    \
    X(40391, Location40391)                                                    \
    X(40397, Location40397)                                                    \
    X(40392, Location40392)                                                    \
    X(40393, Location40393)                                                    \
    X(40395, Location40395)                                                    \
    X(40394, Location40394)                                                    \
    X(4940400, Location4940400)                                                \
    X(4940401, Location4940401)                                                \
    X(34435, Location34435)                                                    \
    X(34443, Location34443)                                                    \
    X(34444, Location34444)                                                    \
    X(34445, Location34445)                                                    \
    X(34446, Location34446)                                                    \
    X(34447, Location34447)                                                    \
    X(34448, Location34448)                                                    \
    X(34449, Location34449)                                                    \
    X(28725, Location28725)                                                    \
    X(28726, Location28726)                                                    \
    X(28727, Location28727)                                                    \
    X(28728, Location28728)                                                    \
    X(28729, Location28729)                                                    \
    X(17043, Location17043)                                                    \
    X(17047, Location17047)                                                    \
    X(17048, Location17048)                                                    \
    X(17049, Location17049)                                                    \
    X(17311, Location17311)                                                    \
    X(17310, Location17310)                                                    \
    X(17046, Location17046)                                                    \
    X(17042, Location17042)                                                    \
    X(5887502, Location5887502)                                                \
    X(17044, Location17044)                                                    \
    X(16611, Location16611)                                                    \
    X(5733415, Location5733415)                                                \
    X(28680, Location28680)                                                    \
    X(51080, Location51080)                                                    \
    X(51081, Location51081)                                                    \
    X(51082, Location51082)                                                    \
    X(51083, Location51083)                                                    \
    X(28762, Location28762)                                                    \
    X(28763, Location28763)                                                    \
    X(28756, Location28756)                                                    \
    X(28757, Location28757)                                                    \
    X(28758, Location28758)                                                    \
    X(28759, Location28759)                                                    \
    X(28766, Location28766)                                                    \
    X(28808, Location28808)                                                    \
    X(28809, Location28809)                                                    \
    X(28810, Location28810)                                                    \
    X(28811, Location28811)                                                    \
    X(28812, Location28812)                                                    \
    X(28818, Location28818)                                                    \
    X(31002, Location31002)                                                    \
    X(34471, Location34471)                                                    \
    X(34473, Location34473)                                                    \
    X(40066, Location40066)                                                    \
    X(40081, Location40081)                                                    \
    X(40085, Location40085)                                                    \
    X(40086, Location40086)                                                    \
    X(40228, Location40228)                                                    \
    X(40229, Location40229)                                                    \
    X(40234, Location40234)                                                    \
    X(40238, Location40238)                                                    \
    X(40390, Location40390)                                                    \
    X(40400, Location40400)                                                    \
    X(40485, Location40485)                                                    \
    X(50699, Location50699)                                                    \
    X(51272, Location51272)                                                    \
    X(16412, Location16412)                                                    \
    X(16866, Location16866)                                                    \
    X(15959, Location15959)                                                    \
    X(15969, Location15969)                                                    \
    X(15973, Location15973)                                                    \
    X(15976, Location15976)                                                    \
    X(28822, Location28822)                                                    \
    X(31119, Location31119)                                                    \
    X(31120, Location31120)                                                    \
    X(40148, Location40148)                                                    \
    X(40158, Location40158)                                                    \
    X(40169, Location40169)                                                    \
    X(40170, Location40170)                                                    \
    X(40237, Location40237)                                                    \
    X(40272, Location40272)                                                    \
    X(40602, Location40602)                                                    \
    X(50741, Location50741)                                                    \
    X(50740, Location50740)                                                    \
    X(50739, Location50739)                                                    \
    X(50738, Location50738)                                                    \
    X(50737, Location50737)                                                    \
    X(50736, Location50736)                                                    \
    X(28746, Location28746)                                                    \
    X(28747, Location28747)                                                    \
    X(28748, Location28748)                                                    \
    X(28749, Location28749)                                                    \
    X(5858203, Location5858203)                                                \
    X(4568, Location4568)                                                      \
    X(5414201, Location5414201)                                                \
    X(7429703, Location7429703)                                                \
    X(7436100, Location7436100)                                                \
    X(7472500, Location7472500)                                                \
    X(7750300, Location7750300)                                                \
    X(7750302, Location7750302)                                                \
    X(7750303, Location7750303)                                                \
    X(5787801, Location5787801)                                                \
    X(5788001, Location5788001)                                                \
    X(5788002, Location5788002)                                                \
    X(5788003, Location5788003)                                                \
    X(6050106, Location6050106)                                                \
    X(5423900, Location5423900)                                                \
    X(5423901, Location5423901)                                                \
    X(5423902, Location5423902)                                                \
    X(15974, Location15974)                                                    \
    X(15975, Location15975)                                                    \
    X(17312, Location17312)                                                    \
    X(31138, Location31138)                                                    \
    X(5787900, Location5787900)                                                \
    X(5788004, Location5788004)                                                \
    X(5788005, Location5788005)                                                \
    X(7750301, Location7750301)                                                \
    X(5339900, Location5339900)                                                \
    X(5339901, Location5339901)                                                \
    X(5339902, Location5339902)                                                \
    X(8947401, Location8947401)                                                \
    X(5371601, Location5371601)                                                \
    X(5371602, Location5371602)                                                \
    X(5371603, Location5371603)                                                \
    X(605001, Location605001)                                                  \
    X(5490710, Location5490710)                                                \
    X(6307900, Location6307900)                                                \
    X(5429413, Location5429413)                                                \
    X(5429414, Location5429414)                                                \
    X(5429513, Location5429513)                                                \
    X(5643011, Location5643011)                                                \
    X(5733401, Location5733401)                                                \
    X(5733402, Location5733402)                                                \
    X(5733403, Location5733403)                                                \
    X(5733404, Location5733404)                                                \
    X(5733405, Location5733405)                                                \
    X(5733406, Location5733406)                                                \
    X(5733408, Location5733408)                                                \
    X(5733409, Location5733409)                                                \
    X(5733410, Location5733410)                                                \
    X(5876900, Location5876900)                                                \
    X(5946800, Location5946800)                                                \
    X(5946802, Location5946802)                                                \
    X(6586400, Location6586400)                                                \
    X(5733201, Location5733201)                                                \
    X(6053600, Location6053600)                                                \
    X(5897900, Location5897900)                                                \
    X(6007200, Location6007200)                                                \
    X(8993000, Location8993000)                                                \
    X(9554500, Location9554500)                                                \
    X(6050200, Location6050200)                                                \
    X(6050201, Location6050201)                                                \
    X(6050202, Location6050202)                                                \
    X(6050203, Location6050203)                                                \
    X(6050204, Location6050204)                                                \
    X(40413, Location40413)                                                    \
    X(5787901, Location5787901)                                                \
    X(5787902, Location5787902)                                                \
    X(5787903, Location5787903)                                                \
    X(5787906, Location5787906)                                                \
    X(5787907, Location5787907)                                                \
    X(5787908, Location5787908)                                                \
    X(5624900, Location5624900)                                                \
    X(5624901, Location5624901)                                                \
    X(5624902, Location5624902)                                                \
    X(5624903, Location5624903)                                                \
    X(16867, Location16867)                                                    \
    X(16868, Location16868)                                                    \
    X(40601, Location40601)                                                    \
    X(13113, MergeStageNoMatchingDocument)                                     \
    X(40192, Location40192)                                                    \
    X(40193, Location40193)                                                    \
    X(40194, Location40194)                                                    \
    X(40199, Location40199)                                                    \
    X(40600, Location40600)                                                    \
    X(40647, Location40647)                                                    \
    X(50865, Location50865)                                                    \
    X(51047, Location51047)                                                    \
    X(51132, Location51132)                                                    \
    X(51183, Location51183)                                                    \
    X(50790, Location50790)                                                    \
    X(50791, Location50791)                                                    \
    X(17152, Location17152)                                                    \
    X(40200, Location40200)                                                    \
    X(40202, Location40202)                                                    \
    X(40196, Location40196)                                                    \
    X(40197, Location40197)                                                    \
    X(40198, Location40198)                                                    \
    X(40201, Location40201)                                                    \
    X(16990, Location16990)                                                    \
    X(51182, Location51182)                                                    \
    X(51134, Location51134)                                                    \
    X(51186, Location51186)                                                    \
    X(51187, Location51187)                                                    \
    X(17385, Location17385)                                                    \
    X(31319, Location31319)                                                    \
    X(31320, Location31320)                                                    \
    X(31321, Location31321)                                                    \
    X(51181, Location51181)                                                    \
    X(51199, Location51199)                                                    \
    X(51273, Location51273)                                                    \
    X(51185, Location51185)                                                    \
    X(51191, Location51191)                                                    \
    X(31465, Location31465)                                                    \
    X(238, NotImplemented)                                                     \
    X(40573, Location40573)                                                    \
    X(17420, Location17420)                                                    \
    X(40606, Location40606)                                                    \
    X(40608, Location40608)                                                    \
    X(40609, Location40609)                                                    \
    X(40611, Location40611)                                                    \
    X(40612, Location40612)                                                    \
    X(40515, Location40515)                                                    \
    X(40516, Location40516)                                                    \
    X(40517, Location40517)                                                    \
    X(40518, Location40518)                                                    \
    X(40519, Location40519)                                                    \
    X(40520, Location40520)                                                    \
    X(40521, Location40521)                                                    \
    X(40522, Location40522)                                                    \
    X(40523, Location40523)                                                    \
    X(40524, Location40524)                                                    \
    X(40525, Location40525)                                                    \
    X(40489, Location40489)                                                    \
    X(31034, Location31034)                                                    \
    X(31095, Location31095)                                                    \
    X(40540, Location40540)                                                    \
    X(40541, Location40541)                                                    \
    X(40542, Location40542)                                                    \
    X(40684, Location40684)                                                    \
    X(18533, Location18533)                                                    \
    X(18534, Location18534)                                                    \
    X(18535, Location18535)                                                    \
    X(18536, Location18536)                                                    \
    X(18537, Location18537)                                                    \
    X(18628, Location18628)                                                    \
    X(18629, Location18629)                                                    \
    X(40535, Location40535)                                                    \
    X(40536, Location40536)                                                    \
    X(40539, Location40539)                                                    \
    X(5166301, Location5166301)                                                \
    X(5166302, Location5166302)                                                \
    X(5166303, Location5166303)                                                \
    X(5166304, Location5166304)                                                \
    X(5166305, Location5166305)                                                \
    X(5166307, Location5166307)                                                \
    X(5166308, Location5166308)                                                \
    X(5166400, Location5166400)                                                \
    X(5166401, Location5166401)                                                \
    X(5166402, Location5166402)                                                \
    X(5166403, Location5166403)                                                \
    X(5166405, Location5166405)                                                \
    X(5166406, Location5166406)                                                \
    X(5976500, Location5976500)                                                \
    X(6045000, Location6045000)                                                \
    X(5439000, Location5439000)                                                \
    X(5439001, Location5439001)                                                \
    X(7182500, Location7182500)                                                \
    X(7182502, Location7182502)                                                \
    X(7182800, Location7182800)                                                \
    X(7182802, Location7182802)                                                \
    X(7268700, Location7268700)                                                \
    X(7406103, Location7406103)                                                \
    X(5439002, Location5439002)                                                \
    X(5439004, Location5439004)                                                \
    X(5439006, Location5439006)                                                \
    X(5439007, Location5439007)                                                \
    X(5439008, Location5439008)                                                \
    X(5439009, Location5439009)                                                \
    X(5439010, Location5439010)                                                \
    X(5439013, Location5439013)                                                \
    X(5439014, Location5439014)                                                \
    X(5439015, Location5439015)                                                \
    X(5439016, Location5439016)                                                \
    X(5439017, Location5439017)                                                \
    X(5439018, Location5439018)                                                \
    X(51103, Location51103)                                                    \
    X(51104, Location51104)                                                    \
    X(51105, Location51105)                                                    \
    X(51106, Location51106)                                                    \
    X(51107, Location51107)                                                    \
    X(51109, Location51109)                                                    \
    X(51110, Location51110)                                                    \
    X(51111, Location51111)                                                    \
    X(51151, Location51151)                                                    \
    X(31022, Location31022)                                                    \
    X(31023, Location31023)                                                    \
    X(31024, Location31024)                                                    \
    X(51744, Location51744)                                                    \
    X(51745, Location51745)                                                    \
    X(51746, Location51746)                                                    \
    X(51747, Location51747)                                                    \
    X(51748, Location51748)                                                    \
    X(51749, Location51749)                                                    \
    X(51750, Location51750)                                                    \
    X(51751, Location51751)                                                    \
    X(2942500, Location2942500)                                                \
    X(2942501, Location2942501)                                                \
    X(2942502, Location2942502)                                                \
    X(2942503, Location2942503)                                                \
    X(2942504, Location2942504)                                                \
    X(2942505, Location2942505)                                                \
    X(2942506, Location2942506)                                                \
    X(34460, Location34460)                                                    \
    X(34461, Location34461)                                                    \
    X(34462, Location34462)                                                    \
    X(34463, Location34463)                                                    \
    X(34464, Location34464)                                                    \
    X(34465, Location34465)                                                    \
    X(34466, Location34466)                                                    \
    X(34467, Location34467)                                                    \
    X(34468, Location34468)                                                    \
    X(4161100, Location4161100)                                                \
    X(4161101, Location4161101)                                                \
    X(4161102, Location4161102)                                                \
    X(4161103, Location4161103)                                                \
    X(4161105, Location4161105)                                                \
    X(4161106, Location4161106)                                                \
    X(4161107, Location4161107)                                                \
    X(4161108, Location4161108)                                                \
    X(4161109, Location4161109)                                                \
    X(4341106, Location4341106)                                                \
    X(4341107, Location4341107)                                                \
    X(4341108, Location4341108)                                                \
    X(4341114, Location4341114)                                                \
    X(4341115, Location4341115)                                                \
    X(4341125, Location4341125)                                                \
    X(3041701, Location3041701)                                                \
    X(3041702, Location3041702)                                                \
    X(3041703, Location3041703)                                                \
    X(3041704, Location3041704)                                                \
    X(5687301, Location5687301)                                                \
    X(5687302, Location5687302)                                                \
    X(10065, Location10065)                                                    \
    X(3040501, Location3040501)                                                \
    X(7436200, Location7436200)                                                \
    X(7436201, Location7436201)                                                \
    X(17053, Location17053)                                                    \
    X(40239, Location40239)                                                    \
    X(40240, Location40240)                                                    \
    X(40241, Location40241)                                                    \
    X(40242, Location40242)                                                    \
    X(40243, Location40243)                                                    \
    X(40244, Location40244)                                                    \
    X(40245, Location40245)                                                    \
    X(40246, Location40246)                                                    \
    X(40257, Location40257)                                                    \
    X(40258, Location40258)                                                    \
    X(40259, Location40259)                                                    \
    X(40260, Location40260)                                                    \
    X(40261, Location40261)                                                    \
    X(40262, Location40262)                                                    \
    X(40263, Location40263)                                                    \
    X(40268, Location40268)                                                    \
    X(31441, Location31441)                                                    \
    X(40099, Location40099)                                                    \
    X(40100, Location40100)                                                    \
    X(40101, Location40101)                                                    \
    X(40102, Location40102)                                                    \
    X(40103, Location40103)                                                    \
    X(40104, Location40104)                                                    \
    X(40105, Location40105)                                                    \
    X(40185, Location40185)                                                    \
    X(40271, Location40271)                                                    \
    X(28803, Location28803)                                                    \
    X(50933, Location50933)                                                    \
    X(4544714, Location4544714)                                                \
    X(13026, Location13026)                                                    \
    X(13027, Location13027)                                                    \
    X(13067, Location13067)                                                    \
    X(13068, Location13068)                                                    \
    X(16755, Location16755)                                                    \
    X(16747, Location16747)                                                    \
    X(16748, Location16748)                                                    \
    X(16749, Location16749)                                                    \
    X(16804, Location16804)                                                    \
    X(16606, Location16606)                                                    \
    X(16607, Location16607)                                                    \
    X(40227, Location40227)                                                    \
    X(50856, Location50856)                                                    \
    X(50857, Location50857)                                                    \
    X(50858, Location50858)                                                    \
    X(5860400, Location5860400)                                                \
    X(5860401, Location5860401)                                                \
    X(5626500, Location5626500)                                                \
    X(5626701, Location5626701)                                                \
    X(5626702, Location5626702)                                                \
    X(16893, Location16893)                                                    \
    X(16894, Location16894)                                                    \
    X(16895, Location16895)                                                    \
    X(16896, Location16896)                                                    \
    X(34413, Location34413)                                                    \
    X(18522, Location18522)                                                    \
    X(16800, Location16800)                                                    \
    X(16764, Location16764)                                                    \
    X(16766, Location16766)                                                    \
    X(31303, Location31303)                                                    \
    X(16801, Location16801)                                                    \
    X(16803, Location16803)                                                    \
    X(7246200, Location7246200)                                                \
    X(7246201, Location7246201)                                                \
    X(7246204, Location7246204)                                                \
    X(7246208, Location7246208)                                                \
    X(7246209, Location7246209)                                                \
    X(7246210, Location7246210)                                                \
    X(7246211, Location7246211)                                                \
    X(7369100, Location7369100)                                                \
    X(13103, Location13103)                                                    \
    X(237, CursorKilled)                                                       \
    X(279, ClientDisconnect)

/*
 * Symbolic names used by the code: MF_E_<CodeName>. A few codes have code
 * names MongoDB shares or reports as "Location<N>"; the table above keeps
 * them distinct so the X-macro can generate enum names.
 */
enum {
    MF_OK = 0,
#define MF_X_ENUM(code, name) MF_E_##name = code,
    MF_ERROR_CODES(MF_X_ENUM)
#undef MF_X_ENUM
};

typedef struct mf_error {
    int code;      /* 0 when no error is set */
    char msg[1024]; /* human-readable, MongoDB's wording where it has one */
    /*
     * Extra reply fields (a BSON document's bytes, e.g. keyPattern/keyValue
     * of a duplicate key error), info_len 0 when none. Inline so the error
     * object stays a plain value with nothing to free.
     */
    uint32_t info_len;
    uint8_t info[4096];
    /*
     * Set (mf_err_planning) on an error mongod raises while it builds a plan,
     * before its executor runs, when mayfly meets it later (a pipeline's stage
     * prepared at its first document): mf_err_context leaves its message bare.
     */
    bool planning;
    /*
     * Set (mf_err_optimizing) on an error mongod raises while it optimizes a
     * pipeline (folding a constant expression, pre-parsing a constant time
     * zone or unit), which mayfly meets while it parses one: no stage adds
     * its parse context ("Invalid $project"), and the aggregate adds
     * "Failed to optimize pipeline" (cmd_agg.c).
     */
    bool optimizing;
} mf_error_t;

/*
 * mf_err_set: record code and a printf-style message on err (err may be NULL).
 * Always returns -1 so callers can write `return mf_err_set(err, ...)`.
 */
int mf_err_set(mf_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mf_err_vset(mf_error_t *err, int code, const char *fmt, va_list ap);

/* mf_err_write_conflict: 112 WriteConflict with mongod's message on err; returns -1. */
int mf_err_write_conflict(mf_error_t *err);

/* mf_err_set_info: attaches the fields of doc (bson bytes) to err; dropped if too large. */
void mf_err_set_info(mf_error_t *err, const uint8_t *doc, uint32_t len);

/*
 * mf_err_context: mongod's Status::withContext: err's message becomes
 * "<context> :: caused by :: <message>", its code and info kept (unchanged
 * for a planning error, see mf_error_t.planning). Returns -1.
 */
int mf_err_context(mf_error_t *err, const char *context);

/* mf_err_planning: marks err as a planning error (see mf_error_t.planning); returns -1. */
int mf_err_planning(mf_error_t *err);
/* mf_err_optimizing: marks err as an optimization error (see mf_error_t.optimizing); returns -1. */
int mf_err_optimizing(mf_error_t *err);

/* mf_err_clear: reset err to "no error". */
void mf_err_clear(mf_error_t *err);

/*
 * mf_err_is_interruption: code is in mongod's Interruption category
 * (error_codes.yml: LockTimeout, MaxTimeMSExpired, CursorKilled,
 * ExceededTimeLimit, ClientDisconnect, Interrupted*, ClientMarkedKilled).
 * A write statement failing with one fails its whole command, as mongod's
 * write_ops_exec handleError rethrows them instead of reporting a writeError.
 */
bool mf_err_is_interruption(int code);

/*
 * mf_err_codename: MongoDB's codeName for code ("BadValue"); codes that
 * MongoDB reports as "Location<N>" come back in that form. Never NULL; the
 * returned string is static.
 */
const char *mf_err_codename(int code);

#endif /* MF_ERROR_H */
