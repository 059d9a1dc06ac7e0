'use strict';
// Mongoose ODM against mayflyd: models, defaults, timestamps, queries.
const assert = require('node:assert/strict');
const mongoose = require('mongoose');
const h = require('./harness');

const srv = h.useServer();
let conn;

const userSchema = new mongoose.Schema({
  name: { type: String, required: true },
  age: { type: Number, default: 18 },
  role: { type: String, default: 'member', enum: ['member', 'admin'] },
  tags: { type: [String], default: [] },
  address: { city: String, zip: String },
}, { timestamps: true });

function model() {
  return conn.models.User || conn.model('User', userSchema);
}

h.test('connect with mongoose', async () => {
  const db = srv.freshDb('mongoose');
  conn = await mongoose.createConnection(srv.uri, { dbName: db.databaseName }).asPromise();
  assert.equal(conn.readyState, 1);
  await model().init(); // builds indexes, runs listIndexes/createIndexes
});

h.test('save applies defaults and timestamps', async () => {
  const User = model();
  const before = Date.now();
  const u = await new User({ name: 'ann', address: { city: 'Oslo' } }).save();
  assert.ok(u._id);
  assert.equal(u.age, 18);
  assert.equal(u.role, 'member');
  assert.ok(u.createdAt instanceof Date);
  assert.ok(u.updatedAt instanceof Date);
  assert.ok(u.createdAt.getTime() >= before - 5000);
  const raw = await conn.db.collection('users').findOne({ _id: u._id });
  assert.equal(raw.name, 'ann');
  assert.equal(raw.age, 18);
  assert.equal(raw.__v, 0);
  assert.ok(raw.createdAt instanceof Date);
});

h.test('validation errors are raised before touching the server', async () => {
  const User = model();
  await assert.rejects(new User({ age: 3 }).save(), /name.*required|required/);
  await assert.rejects(new User({ name: 'x', role: 'boss' }).save(), /role/);
});

h.test('find, findOne, sort, select, countDocuments', async () => {
  const User = model();
  await User.create([{ name: 'bob', age: 30, tags: ['a'] }, { name: 'cy', age: 25, tags: ['a', 'b'] }, { name: 'di', age: 40 }]);
  const found = await User.find({ age: { $gte: 25 } }).sort({ age: -1 }).select('name age -_id').lean();
  assert.deepEqual(found, [{ name: 'di', age: 40 }, { name: 'bob', age: 30 }, { name: 'cy', age: 25 }]);
  const one = await User.findOne({ name: 'cy' });
  assert.equal(one.age, 25);
  assert.deepEqual([...one.tags], ['a', 'b']);
  assert.equal(await User.countDocuments({ tags: 'a' }), 2);
  const byId = await User.findById(one._id);
  assert.equal(byId.name, 'cy');
});

h.test('updateOne, findOneAndUpdate and document save bump updatedAt', async () => {
  const User = model();
  const u = await User.findOne({ name: 'bob' });
  const oldUpdated = u.updatedAt.getTime();
  await h.sleep(20);
  const r = await User.updateOne({ name: 'bob' }, { $inc: { age: 1 }, $push: { tags: 'z' } });
  assert.equal(r.matchedCount, 1);
  assert.equal(r.modifiedCount, 1);
  const after = await User.findOne({ name: 'bob' });
  assert.equal(after.age, 31);
  assert.deepEqual([...after.tags], ['a', 'z']);
  assert.ok(after.updatedAt.getTime() > oldUpdated, 'updatedAt bumped');
  assert.equal(after.createdAt.getTime(), u.createdAt.getTime());
  const fau = await User.findOneAndUpdate({ name: 'cy' }, { role: 'admin' }, { returnDocument: 'after' });
  assert.equal(fau.role, 'admin');
  after.address = { city: 'Rome', zip: '001' };
  await after.save();
  assert.equal((await User.findById(after._id).lean()).address.city, 'Rome');
});

h.test('deleteOne and deleteMany', async () => {
  const User = model();
  const r = await User.deleteOne({ name: 'di' });
  assert.equal(r.deletedCount, 1);
  assert.equal(await User.findOne({ name: 'di' }), null);
  const all = await User.deleteMany({});
  assert.ok(all.deletedCount >= 3);
  assert.equal(await User.countDocuments(), 0);
});

h.test('unique index through the schema raises E11000', async () => {
  const schema = new mongoose.Schema({ email: { type: String, unique: true } });
  const Acc = conn.model('Acc', schema);
  await Acc.init();
  await Acc.create({ email: 'a@b' });
  await assert.rejects(Acc.create({ email: 'a@b' }), (e) => e.code === 11000);
});

h.test('aggregate through a model', async () => {
  const User = model();
  await User.create([{ name: 'p', age: 10 }, { name: 'q', age: 20 }, { name: 'r', age: 20 }]);
  const r = await User.aggregate([{ $group: { _id: '$age', n: { $sum: 1 } } }, { $sort: { _id: 1 } }]);
  assert.deepEqual(r, [{ _id: 10, n: 1 }, { _id: 20, n: 2 }]);
});

h.test('populate resolves references with a second query', async () => {
  const Author = conn.model('Author', new mongoose.Schema({ name: String }));
  const Book = conn.model('Book', new mongoose.Schema({
    title: String, author: { type: mongoose.Schema.Types.ObjectId, ref: 'Author' },
  }));
  const a = await Author.create({ name: 'Le Guin' });
  await Book.create([{ title: 'Earthsea', author: a._id }, { title: 'Dispossessed', author: a._id }]);
  const books = await Book.find().sort({ title: 1 }).populate('author').lean();
  assert.deepEqual(books.map((b) => [b.title, b.author.name]), [['Dispossessed', 'Le Guin'], ['Earthsea', 'Le Guin']]);
});

h.test('lean queries, cursors and bulkWrite through mongoose', async () => {
  const Item = conn.model('Item', new mongoose.Schema({ n: Number }));
  await Item.insertMany(Array.from({ length: 300 }, (_, i) => ({ n: i })));
  let count = 0;
  for await (const doc of Item.find().sort({ n: 1 }).cursor({ batchSize: 50 })) {
    assert.equal(doc.n, count);
    count += 1;
  }
  assert.equal(count, 300);
  const r = await Item.bulkWrite([
    { updateMany: { filter: { n: { $lt: 10 } }, update: { $set: { n: -1 } } } },
    { deleteMany: { filter: { n: { $gte: 290 } } } },
  ]);
  assert.equal(r.modifiedCount, 10);
  assert.equal(r.deletedCount, 10);
  assert.equal(await Item.countDocuments({ n: -1 }), 10);
  assert.equal(await Item.estimatedDocumentCount(), 290);
});

h.test('disconnect', async () => {
  await conn.close();
});
